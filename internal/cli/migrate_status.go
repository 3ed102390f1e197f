package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/migrate"
)

// newCmdMigrateStatus builds `migrate status`; runF, if not nil, replaces migrateStatus (tests).
func newCmdMigrateStatus(stdio IO, fl *migrateFlags, runF func(context.Context, migrateStores) error) *cobra.Command {
	return newCmdMigrateStoresVerb(&cobra.Command{Use: "status", Short: "Where each family's migration stands"},
		fl, func(ctx context.Context, stores migrateStores) error { return migrateStatus(ctx, stdio, stores) }, runF)
}

func migrateStatus(ctx context.Context, stdio IO, stores migrateStores) error {
	if stores.freezeMove() {
		return migrateMongoStatus(ctx, stdio, stores)
	}
	dst, fams, closeDst, err := stores.statusTarget(ctx)
	if err != nil {
		return err
	}
	defer closeDst()
	states, err := dst.States(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAMILY\tPHASE\tFROM\tRUN\tRANGES COPIED\tROWS COPIED\tVERIFIED\tWRITERS\tNOTE")
	for _, f := range fams {
		s := states[f]
		ranges, rows := "-", "-"
		if s.Run != "" {
			cps, err := dst.Checkpoints(ctx, s.Run, f)
			if err != nil {
				return err
			}
			var n int64
			for _, c := range cps {
				n += c.Rows
			}
			planned, err := dst.PlannedRanges(ctx, s.Run, f)
			if err != nil {
				return err
			}
			ranges, rows = fmt.Sprintf("%d/%d", len(cps), planned), fmt.Sprint(n)
		}
		verified := "-"
		if !s.VerifiedAt.IsZero() {
			verified = fmt.Sprintf("%s (%d rows)", s.VerifiedAt.Format(time.RFC3339), s.Rows)
		}
		ws, err := dst.Writers(ctx, f)
		if err != nil {
			return err
		}
		writers := make([]string, len(ws))
		for i, w := range ws {
			writers[i] = fmt.Sprintf("%s=%s", w.ID, migrate.PhaseName(w.Phase))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f, migrate.PhaseName(s.Phase), dash(s.Source), dash(s.Run), ranges, rows, verified, dash(strings.Join(writers, " ")), dash(s.Note))
	}
	return tw.Flush()
}
