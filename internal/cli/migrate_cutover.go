package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// migrateCutoverOptions are `migrate cutover`'s settings.
type migrateCutoverOptions struct {
	Stores      migrateStores
	WritersWait time.Duration
	Rollback    bool // back to the old store
}

// newCmdMigrateCutover builds `migrate cutover`; runF, if not nil, replaces migrateCutover (tests).
func newCmdMigrateCutover(stdio IO, fl *migrateFlags, runF func(context.Context, migrateCutoverOptions) error) *cobra.Command {
	var o migrateCutoverOptions
	c := &cobra.Command{Use: "cutover", Short: "Serve the family from Cassandra (after a passing verify); --rollback returns it to the old store", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o.Stores, o.WritersWait = fl.stores, fl.writersWait
			if runF != nil {
				return runF(c.Context(), o)
			}
			return migrateCutover(c.Context(), stdio, o)
		}}
	c.Flags().BoolVar(&o.Rollback, "rollback", false, "return a cut-over family to the old store (phase copied: dual writes resume; verify again before the next cutover)")
	return c
}

func migrateCutover(ctx context.Context, stdio IO, o migrateCutoverOptions) error {
	if o.Stores.freezeMove() {
		return migrateMongoCutover(ctx, stdio, o.Stores, o.Rollback)
	}
	env, fams, err := o.Stores.open(ctx, false)
	if err != nil {
		return err
	}
	defer env.Close()
	for _, f := range fams {
		move := env.Dst.Cutover
		if o.Rollback {
			move = env.Dst.Rollback
		}
		st, err := move(ctx, f)
		if err != nil {
			return err
		}
		if err := waitWriters(ctx, stdio, env.Dst, o.WritersWait, f, st.Phase); err != nil {
			return err
		}
		if o.Rollback {
			fmt.Fprintf(stdio.Out, "%s: rolled back: served from %s again, dual writes to %s continue; run migrate verify before the next cutover\n", f, st.Source, o.Stores.targetName())
		} else {
			fmt.Fprintf(stdio.Out, "%s: cut over: served from %s (placement %s=%s, kept across restarts by the migration state)\n", f, o.Stores.targetName(), f, o.Stores.To)
		}
	}
	return nil
}
