package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/migrate"
)

// migrateRunOptions are `migrate run`'s settings.
type migrateRunOptions struct {
	Stores      migrateStores
	Run         string
	Workers     int
	Ranges      int
	WritersWait time.Duration
	Progress    string  // bar, lines or auto
	MaxRate     float64 // rows per second, 0: no cap
	Offline     bool    // run with no shop process following the state (the shop is stopped)
}

// newCmdMigrateRun builds `migrate run`; runF, if not nil, replaces migrateRun (tests).
func newCmdMigrateRun(stdio IO, fl *migrateFlags, runF func(context.Context, migrateRunOptions) error) *cobra.Command {
	var o migrateRunOptions
	c := &cobra.Command{Use: "run", Short: "Dual writes on, then the checkpointed backfill (resumes where a killed run stopped)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o.Stores, o.Run, o.Workers, o.Ranges, o.WritersWait, o.Progress = fl.stores, fl.run, fl.workers, fl.ranges, fl.writersWait, fl.progress
			if runF != nil {
				return runF(c.Context(), o)
			}
			return migrateRun(c.Context(), stdio, o)
		}}
	c.Flags().Float64Var(&o.MaxRate, "max-rows-per-sec", 0, "cap on rows copied per second, to spare a busy old store (0: none)")
	c.Flags().BoolVar(&o.Offline, "offline", false, "proceed when no shop process follows the migration state (only when the shop is stopped)")
	return c
}

func migrateRun(ctx context.Context, stdio IO, o migrateRunOptions) error {
	if o.Stores.freezeMove() {
		return migrateMongoRun(ctx, stdio, o.Stores, o.MaxRate)
	}
	env, fams, err := o.Stores.open(ctx, false)
	if err != nil {
		return err
	}
	defer env.Close()
	for _, f := range fams {
		if err := migrateRunFamily(ctx, stdio, env, o, f); err != nil {
			return err
		}
	}
	return nil
}

func migrateRunFamily(ctx context.Context, stdio IO, env *migrateEnv, o migrateRunOptions, f migrate.Family) error {
	start, err := env.Dst.BeginCopy(ctx, f, o.Stores.From, o.Run, o.Offline)
	if err != nil {
		return err
	}
	st := start.State
	switch {
	case start.Started:
		fmt.Fprintf(stdio.Err, "%s: dual writes on (run %s)\n", f, st.Run)
	case start.Resumed:
		fmt.Fprintf(stdio.Err, "%s: resuming run %s\n", f, st.Run)
	default:
		fmt.Fprintf(stdio.Err, "%s: already %s (run %s); nothing to copy\n", f, st.Phase, st.Run)
		return nil
	}
	if err := waitWriters(ctx, stdio, env.Dst, o.WritersWait, f, migrate.DualWrite); err != nil {
		return err
	}
	total, err := env.Src.Count(ctx, f)
	if err != nil {
		return err
	}
	prog := o.newProgress(stdio, f, total)
	stats, err := migrate.Backfill(ctx, env.Src, env.Dst, f, migrate.Options{Run: st.Run, Split: o.Ranges, Workers: o.Workers,
		MaxRate: o.MaxRate, Progress: prog.update})
	prog.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "%s: copied %d rows (%d expired, skipped) in %s, %.0f rows/s; %d of %d ranges were done before\n",
		f, stats.Rows, stats.Skipped, stats.Elapsed.Round(time.Millisecond), float64(stats.Rows)/max(stats.Elapsed.Seconds(), 1e-6), stats.Resume, stats.Ranges)
	return env.Dst.FinishCopy(ctx, st)
}

// progress shows a backfill: a bar with rows/s and ETA on a terminal, plain lines otherwise.
type progress struct {
	bar   *progressbar.ProgressBar
	out   io.Writer
	f     migrate.Family
	total int64
	last  time.Time
}

func (o *migrateRunOptions) newProgress(stdio IO, f migrate.Family, total int64) *progress {
	p := &progress{out: stdio.Err, f: f, total: total}
	bar := o.Progress == "bar"
	if o.Progress == "auto" {
		if file, ok := stdio.Err.(*os.File); ok && isatty.IsTerminal(file.Fd()) {
			bar = true
		}
	}
	if bar {
		p.bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(stdio.Err), progressbar.OptionSetDescription(string(f)),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("rows"),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionFullWidth())
	}
	return p
}

func (p *progress) update(pr migrate.Progress) {
	done := pr.Rows + pr.Skipped
	if p.bar != nil {
		_ = p.bar.Set64(done)
		return
	}
	if time.Since(p.last) < 2*time.Second && pr.RangesDone != pr.Ranges {
		return
	}
	p.last = time.Now()
	eta := "-"
	if pr.RowsPerSec > 0 && p.total > done {
		eta = time.Duration(float64(p.total-done) / pr.RowsPerSec * float64(time.Second)).Round(time.Second).String()
	}
	fmt.Fprintf(p.out, "%s: ranges %d/%d, rows %d/%d (%d expired), %.0f rows/s, eta %s\n",
		p.f, pr.RangesDone, pr.Ranges, pr.Rows, p.total, pr.Skipped, pr.RowsPerSec, eta)
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.out)
	}
}
