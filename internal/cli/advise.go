package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/advise"
	"github.com/shardmart/shardmart/internal/advise/live"
)

// adviseOptions are `advise`'s settings. Shards, Seed and Ops override the workload's only
// when given on the command line (their *Set fields).
type adviseOptions struct {
	List                       bool
	Scenario, File             string
	SVGPath, JSONPath          string
	Shards                     int
	Seed                       uint64
	Ops                        int64
	Moves                      int
	Timeout                    time.Duration
	ShardsSet, SeedSet, OpsSet bool
	// A live collection instead of a workload (advise_from.go).
	From, Collection string
	Candidates       []string
	Sample           int
	ProfileSeconds   int
}

// newCmdAdvise is the shard-key advisor: it simulates candidate shard keys on a workload
// before anyone runs shardCollection. runF, if not nil, replaces runAdvise (tests).
func newCmdAdvise(stdio IO, runF func(context.Context, adviseOptions) error) *cobra.Command {
	var o adviseOptions
	cmd := &cobra.Command{
		Use:   "advise",
		Short: "Shard-key advisor: simulate candidate shard keys on a workload (built-in scenario or YAML file)",
		Long: `Simulates a MongoDB sharded cluster (6.0.3+ balancer, chunk splits, jumbo chunks, zones,
firehose) for each candidate shard key and prints a side-by-side comparison and a chart.

  shardmart advise --list
  shardmart advise --scenario carts
  shardmart advise --scenario all --svg advise.svg
  shardmart advise -f workload.yaml --shards 6 --seed 7
  shardmart advise --from mongodb://mongos:27017 --collection shop.orders --candidate '{user_id: 1}'

With --from, the workload is read from a live collection (a mongos or a replica set):
its shard key, a bounded $sample, $collStats latencyStats and, with --profile-seconds, a
short profiler sample (replica sets only; the previous level is restored). Read-only.

See docs/advise.md for the workload format and how to read the output.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			o.ShardsSet, o.SeedSet, o.OpsSet = f.Changed("shards"), f.Changed("seed"), f.Changed("ops")
			return runOrRunF(cmd.Context(), stdio, o, runAdvise, runF)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.List, "list", false, "list the built-in scenarios")
	f.StringVar(&o.Scenario, "scenario", "", "built-in scenario to run, or all")
	f.StringVarP(&o.File, "file", "f", "", "workload YAML file")
	f.StringVar(&o.SVGPath, "svg", "", "write a chart of shard shares over time to this SVG file")
	f.StringVar(&o.JSONPath, "json", "", "write every result (per-tick series included) to this JSON file")
	f.IntVar(&o.Shards, "shards", 0, "number of shards (default: the workload's)")
	f.Uint64Var(&o.Seed, "seed", 0, "random seed (default: the workload's); equal seeds give equal results")
	f.Int64Var(&o.Ops, "ops", 0, "simulated operations per candidate (default: the workload's)")
	f.IntVar(&o.Moves, "moves", 0, "also list the first N balancer chunk moves of each candidate")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up after this long")
	f.StringVar(&o.From, "from", "", "advise on a live collection: mongodb:// URI of a mongos or a replica set")
	f.StringVar(&o.Collection, "collection", "", "with --from: the collection, db.collection")
	f.StringArrayVar(&o.Candidates, "candidate", nil, "with --from: a candidate key such as '{user_id: hashed}' (repeatable; default: the sharding spec's alternatives)")
	f.IntVar(&o.Sample, "sample", 1000, fmt.Sprintf("with --from: documents to $sample (at most %d)", live.MaxSample))
	f.IntVar(&o.ProfileSeconds, "profile-seconds", 0, fmt.Sprintf("with --from: profile the database this long (at most %d) for the operation mix; replica sets only", live.MaxProfileSeconds))
	return cmd
}

func runAdvise(ctx context.Context, stdio IO, o adviseOptions) error {
	if o.List {
		return listScenarios(stdio)
	}
	if o.From != "" {
		return runAdviseFrom(ctx, stdio, o)
	}
	if o.Collection != "" || o.Candidates != nil || o.ProfileSeconds != 0 {
		return errors.New("--collection, --candidate and --profile-seconds go with --from <uri>")
	}
	if (o.Scenario == "") == (o.File == "") {
		return errors.New("give exactly one of --scenario <name|all>, -f <workload.yaml> or --from <uri> --collection <db.coll> (--list shows the scenarios)")
	}
	workloads, err := adviseWorkloads(o)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var all []*advise.Result
	for _, w := range workloads {
		results, err := simulateWorkload(ctx, stdio, w)
		if err != nil {
			return err
		}
		advise.WriteTable(stdio.Out, w, results)
		if o.Moves > 0 {
			for _, r := range results {
				advise.WriteMoves(stdio.Out, r, o.Moves)
			}
		}
		all = append(all, results...)
	}
	if o.JSONPath != "" {
		if err := writeAdviseJSON(stdio, o.JSONPath, all); err != nil {
			return err
		}
	}
	if o.SVGPath != "" {
		title := "shardmart advise: " + workloads[0].Name
		if len(workloads) > 1 {
			title = "shardmart advise: all scenarios"
		}
		return writeSVG(stdio, o.SVGPath, title, all)
	}
	return nil
}

// listScenarios prints each built-in scenario with the first sentence of its description.
func listScenarios(stdio IO) error {
	scs, err := advise.Scenarios()
	if err != nil {
		return err
	}
	for _, s := range scs {
		fmt.Fprintf(stdio.Out, "%-14s %s\n", s.Name, firstSentence(s.Description))
	}
	return nil
}

// adviseWorkloads loads the workloads o names (a file, one scenario or all of them) with o's
// shard, seed and ops overrides applied.
func adviseWorkloads(o adviseOptions) ([]*advise.Workload, error) {
	var workloads []*advise.Workload
	switch {
	case o.File != "":
		w, err := advise.LoadWorkload(o.File)
		if err != nil {
			return nil, err
		}
		workloads = append(workloads, w)
	case o.Scenario == "all":
		scs, err := advise.Scenarios()
		if err != nil {
			return nil, err
		}
		for _, s := range scs {
			w, err := advise.LoadScenario(s.Name)
			if err != nil {
				return nil, err
			}
			workloads = append(workloads, w)
		}
	default:
		w, err := advise.LoadScenario(o.Scenario)
		if err != nil {
			return nil, err
		}
		workloads = append(workloads, w)
	}
	for _, w := range workloads {
		if o.ShardsSet {
			if err := w.SetShards(o.Shards); err != nil {
				return nil, err
			}
		}
		if o.SeedSet {
			w.Seed = o.Seed
		}
		if o.OpsSet {
			if o.Ops < 1 {
				return nil, fmt.Errorf("--ops %d: want at least 1", o.Ops)
			}
			w.Ops = o.Ops
		}
	}
	return workloads, nil
}

// simulateWorkload simulates every candidate key of every collection of w, telling stdio.Err
// how fast each went.
func simulateWorkload(ctx context.Context, stdio IO, w *advise.Workload) ([]*advise.Result, error) {
	var results []*advise.Result
	for _, c := range w.Collections {
		for _, cand := range c.Candidates {
			start := time.Now()
			r, err := advise.SimulateCandidate(ctx, w, c, cand)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", c.Name, cand, err)
			}
			el := time.Since(start)
			fmt.Fprintf(stdio.Err, "simulated %s/%s %s: %d ops in %s (%.1fM ops/s)\n",
				w.Name, c.Name, cand, r.Ops, el.Round(time.Millisecond), float64(r.Ops)/el.Seconds()/1e6)
			results = append(results, r)
		}
	}
	return results, nil
}

// writeAdviseJSON writes results to path as indented JSON.
func writeAdviseJSON(stdio IO, path string, results []*advise.Result) error {
	b, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		return fmt.Errorf("json: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	fmt.Fprintf(stdio.Err, "wrote %s\n", path)
	return nil
}

// writeSVG writes the shard-share chart of results to path.
func writeSVG(stdio IO, path, title string, results []*advise.Result) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("svg: %w", err)
	}
	if err := advise.WriteSVG(out, title, results); err != nil {
		out.Close()
		return fmt.Errorf("svg: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("svg: %w", err)
	}
	fmt.Fprintf(stdio.Err, "wrote %s\n", path)
	return nil
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
