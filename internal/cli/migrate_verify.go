package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/migrate"
)

// migrateVerifyOptions are `migrate verify`'s settings.
type migrateVerifyOptions struct {
	Stores  migrateStores
	Ranges  int
	Explain bool // print both sides of each differing key
	Repair  bool // copy the differing keys again from the old store, then verify again
}

// newCmdMigrateVerify builds `migrate verify`; runF, if not nil, replaces migrateVerify (tests).
func newCmdMigrateVerify(stdio IO, fl *migrateFlags, runF func(context.Context, migrateVerifyOptions) error) *cobra.Command {
	var o migrateVerifyOptions
	c := &cobra.Command{Use: "verify", Short: "Compare both stores; exit status 1 on any difference", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o.Stores, o.Ranges = fl.stores, fl.ranges
			if runF != nil {
				return runF(c.Context(), o)
			}
			return migrateVerify(c.Context(), stdio, o)
		}}
	c.Flags().BoolVar(&o.Explain, "explain", false, "print both sides of each listed differing key (fields separated by |)")
	c.Flags().BoolVar(&o.Repair, "repair", false, "copy each differing key again from the old store (the dual write's rule), then verify again")
	return c
}

func migrateVerify(ctx context.Context, stdio IO, o migrateVerifyOptions) error {
	if o.Stores.freezeMove() {
		return migrateMongoVerify(ctx, stdio, o.Stores)
	}
	env, fams, err := o.Stores.open(ctx, false)
	if err != nil {
		return err
	}
	defer env.Close()
	var failed []string
	for _, f := range fams {
		rep, err := migrate.Verify(ctx, env.Src, env.Dst, f, migrate.Options{Split: o.Ranges})
		if errors.Is(err, migrate.ErrDifferences) && o.Repair {
			fmt.Fprintf(stdio.Err, "%s: %d keys differ; copying them again from %s\n", f, len(rep.Diffs), o.Stores.From)
			if err := env.Dst.Repair(ctx, env.Src, f, rep.Diffs); err != nil {
				return err
			}
			rep, err = migrate.Verify(ctx, env.Src, env.Dst, f, migrate.Options{Split: o.Ranges})
		}
		if err != nil && !errors.Is(err, migrate.ErrDifferences) {
			return err
		}
		printReport(stdio.Out, rep)
		if err != nil {
			failed = append(failed, string(f))
			if o.Explain {
				if err := explain(ctx, stdio.Out, env, f, rep.Diffs); err != nil {
					return err
				}
			}
			continue
		}
		marked, err := env.Dst.MarkVerified(ctx, f, int64(rep.SourceRows))
		if err != nil {
			return err
		}
		if marked {
			fmt.Fprintf(stdio.Out, "%s: verified; cutover is allowed\n", f)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s", migrate.ErrDifferences, strings.Join(failed, ", "))
	}
	return nil
}

// maxListed bounds the differing keys printed per family.
const maxListed = 50

func printReport(w io.Writer, rep migrate.Report) {
	diffRanges := 0
	for i := range rep.Source {
		if rep.Source[i] != rep.Target[i] {
			diffRanges++
		}
	}
	fmt.Fprintf(w, "%s: source %d rows, target %d rows, %d ranges, %d differing ranges, %d differing keys\n",
		rep.Family, rep.SourceRows, rep.TargetRows, len(rep.Source), diffRanges, len(rep.Diffs))
	for i, d := range rep.Diffs {
		if i == maxListed {
			fmt.Fprintf(w, "  ... %d more\n", len(rep.Diffs)-maxListed)
			break
		}
		fmt.Fprintf(w, "  range %d  %s  %s\n", d.Range, d.Key, d.Reason)
	}
}

// explain prints both sides of the first maxListed differing keys.
func explain(ctx context.Context, w io.Writer, env *migrateEnv, f migrate.Family, diffs []migrate.Diff) error {
	keys := make([]string, 0, min(len(diffs), maxListed))
	for _, d := range diffs[:min(len(diffs), maxListed)] {
		keys = append(keys, d.Key)
	}
	sides, err := migrate.Explain(ctx, env.Src, env.Dst, f, keys)
	if err != nil {
		return err
	}
	for _, k := range keys {
		s := sides[k]
		fmt.Fprintf(w, "  %s\n    old store: %s\n    new store: %s\n", k, readable(s.Source), readable(s.Target))
	}
	return nil
}

func readable(canonical string) string {
	if canonical == "" {
		return "(none)"
	}
	return strings.ReplaceAll(strings.TrimSuffix(canonical, "\x1f"), "\x1f", " | ")
}
