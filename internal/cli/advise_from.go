package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/shardmart/shardmart/internal/advise"
	"github.com/shardmart/shardmart/internal/advise/live"
	"github.com/shardmart/shardmart/internal/sharding"
)

// runAdviseFrom advises on a live collection: read it (bounded, read-only), build the
// workload, simulate the current key and the candidates, and write the report.
func runAdviseFrom(ctx context.Context, stdio IO, o adviseOptions) error {
	if o.Collection == "" {
		return errors.New("--from needs --collection db.collection")
	}
	if o.Scenario != "" || o.File != "" {
		return errors.New("give exactly one of --scenario, -f or --from")
	}
	var cands []sharding.Key
	for _, s := range o.Candidates {
		k, err := live.ParseKey(s)
		if err != nil {
			return err
		}
		cands = append(cands, k)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	src, err := live.Connect(ctx, o.From)
	if err != nil {
		return err
	}
	defer src.Close(context.WithoutCancel(ctx))
	m := live.Model{Candidates: cands, Seed: o.Seed}
	if o.ShardsSet {
		m.Shards = o.Shards
	}
	if o.OpsSet {
		m.MaxOps = o.Ops
	}
	rep, err := live.Advise(ctx, src, o.Collection, live.Options{Sample: o.Sample, ProfileSeconds: o.ProfileSeconds}, m, stdio.Err)
	if err != nil {
		return err
	}
	rep.WriteText(stdio.Out)
	if o.Moves > 0 {
		for _, r := range rep.Results {
			advise.WriteMoves(stdio.Out, r, o.Moves)
		}
	}
	if o.JSONPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fmt.Errorf("json: %w", err)
		}
		if err := writeOut(stdio, o.JSONPath, b); err != nil {
			return fmt.Errorf("json: %w", err)
		}
	}
	if o.SVGPath != "" {
		return writeSVG(stdio, o.SVGPath, "shardmart advise: live "+o.Collection, rep.Results)
	}
	return nil
}

// writeOut writes b to path, or to stdout for "-" (automation reads the JSON from a pipe).
func writeOut(stdio IO, path string, b []byte) error {
	if path == "-" {
		_, err := stdio.Out.Write(append(b, '\n'))
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Err, "wrote %s\n", path)
	return nil
}
