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
)

// newAdviseCmd is the shard-key advisor: it simulates candidate shard keys
// on a workload before anyone runs shardCollection.
func newAdviseCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "advise",
		Short: "Shard-key advisor: simulate candidate shard keys on a workload (built-in scenario or YAML file)",
		Long: `Simulates a MongoDB sharded cluster (6.0.3+ balancer, chunk splits, jumbo chunks, zones,
firehose) for each candidate shard key and prints a side-by-side comparison and a chart.

  shardmart advise --list
  shardmart advise --scenario carts
  shardmart advise --scenario all --svg advise.svg
  shardmart advise -f workload.yaml --shards 6 --seed 7

See docs/advise.md for the workload format and how to read the output.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return err
			}
			return runAdvise(cmd, stdio)
		},
	}
	f := cmd.Flags()
	f.Bool("list", false, "list the built-in scenarios")
	f.String("scenario", "", "built-in scenario to run, or all")
	f.StringP("file", "f", "", "workload YAML file")
	f.String("svg", "", "write a chart of shard shares over time to this SVG file")
	f.String("json", "", "write every result (per-tick series included) to this JSON file")
	f.Int("shards", 0, "number of shards (default: the workload's)")
	f.Uint64("seed", 0, "random seed (default: the workload's); equal seeds give equal results")
	f.Int64("ops", 0, "simulated operations per candidate (default: the workload's)")
	f.Int("moves", 0, "also list the first N balancer migrations of each candidate")
	f.Duration("timeout", 10*time.Minute, "give up after this long")
	return cmd
}

func runAdvise(cmd *cobra.Command, stdio IO) error {
	f := cmd.Flags()
	list, _ := f.GetBool("list")
	scenario, _ := f.GetString("scenario")
	file, _ := f.GetString("file")
	svgPath, _ := f.GetString("svg")
	jsonPath, _ := f.GetString("json")
	timeout, _ := f.GetDuration("timeout")
	moves, _ := f.GetInt("moves")
	if list {
		scs, err := advise.Scenarios()
		if err != nil {
			return err
		}
		for _, s := range scs {
			fmt.Fprintf(stdio.Out, "%-14s %s\n", s.Name, firstSentence(s.Description))
		}
		return nil
	}
	if (scenario == "") == (file == "") {
		return errors.New("give exactly one of --scenario <name|all> or -f <workload.yaml> (--list shows the scenarios)")
	}
	var workloads []*advise.Workload
	switch {
	case file != "":
		w, err := advise.LoadWorkload(file)
		if err != nil {
			return err
		}
		workloads = append(workloads, w)
	case scenario == "all":
		scs, err := advise.Scenarios()
		if err != nil {
			return err
		}
		for _, s := range scs {
			w, err := advise.LoadScenario(s.Name)
			if err != nil {
				return err
			}
			workloads = append(workloads, w)
		}
	default:
		w, err := advise.LoadScenario(scenario)
		if err != nil {
			return err
		}
		workloads = append(workloads, w)
	}
	for _, w := range workloads {
		if f.Changed("shards") {
			n, _ := f.GetInt("shards")
			if err := w.SetShards(n); err != nil {
				return err
			}
		}
		if f.Changed("seed") {
			w.Seed, _ = f.GetUint64("seed")
		}
		if f.Changed("ops") {
			ops, _ := f.GetInt64("ops")
			if ops < 1 {
				return fmt.Errorf("--ops %d: want at least 1", ops)
			}
			w.Ops = ops
		}
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	var all []*advise.Result
	for _, w := range workloads {
		var results []*advise.Result
		for _, c := range w.Collections {
			for _, cand := range c.Candidates {
				start := time.Now()
				r, err := advise.SimulateCandidate(ctx, w, c, cand)
				if err != nil {
					return fmt.Errorf("%s %s: %w", c.Name, cand, err)
				}
				el := time.Since(start)
				fmt.Fprintf(stdio.Err, "simulated %s/%s %s: %d ops in %s (%.1fM ops/s)\n",
					w.Name, c.Name, cand, r.Ops, el.Round(time.Millisecond), float64(r.Ops)/el.Seconds()/1e6)
				results = append(results, r)
			}
		}
		advise.WriteTable(stdio.Out, w, results)
		if moves > 0 {
			for _, r := range results {
				advise.WriteMoves(stdio.Out, r, moves)
			}
		}
		all = append(all, results...)
	}
	if jsonPath != "" {
		b, err := json.MarshalIndent(all, "", "  ")
		if err != nil {
			return fmt.Errorf("json: %w", err)
		}
		if err := os.WriteFile(jsonPath, b, 0o644); err != nil {
			return fmt.Errorf("json: %w", err)
		}
		fmt.Fprintf(stdio.Err, "wrote %s\n", jsonPath)
	}
	if svgPath != "" {
		out, err := os.Create(svgPath)
		if err != nil {
			return fmt.Errorf("svg: %w", err)
		}
		title := "shardmart advise: " + workloads[0].Name
		if len(workloads) > 1 {
			title = "shardmart advise: all scenarios"
		}
		if err := advise.WriteSVG(out, title, all); err != nil {
			out.Close()
			return fmt.Errorf("svg: %w", err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("svg: %w", err)
		}
		fmt.Fprintf(stdio.Err, "wrote %s\n", svgPath)
	}
	return nil
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
