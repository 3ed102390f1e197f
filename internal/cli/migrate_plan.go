package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/placement"
)

// newCmdMigratePlan builds `migrate plan`; runF, if not nil, replaces migratePlan (tests).
func newCmdMigratePlan(stdio IO, fl *migrateFlags, runF func(context.Context, migrateStores) error) *cobra.Command {
	return newCmdMigrateStoresVerb(&cobra.Command{Use: "plan", Short: "Row counts, estimated time and the placement change"},
		fl, func(ctx context.Context, stores migrateStores) error { return migratePlan(ctx, stdio, stores) }, runF)
}

func migratePlan(ctx context.Context, stdio IO, stores migrateStores) error {
	if stores.To == placement.Mongo {
		return migrateMongoPlan(ctx, stdio, stores)
	}
	env, fams, err := stores.open(ctx, true)
	if err != nil {
		return err
	}
	defer env.Close()
	states, err := env.Dst.States(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAMILY\tROWS\tESTIMATE\tPHASE\tPLACEMENT CHANGE")
	var total int64
	var all time.Duration
	for _, f := range fams {
		n, err := env.Src.Count(ctx, f)
		if err != nil {
			return err
		}
		total += n
		spec, _ := family.Get(f)
		est := time.Duration(float64(n) / spec.CopyRate * float64(time.Second)).Round(time.Second)
		all += est
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s=%s -> %s=%s\n", f, n, est, migrate.PhaseName(states[f].Phase), f, stores.From, f, stores.To)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "\n%d rows, about %s at the 1-node rates of docs/evidence/benchmarks.md. Steps: every shop process runs serve --migrations; then migrate run, verify, cutover per family.\n", total, all)
	return nil
}
