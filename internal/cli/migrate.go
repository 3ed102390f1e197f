package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// migrateOptions are the settings every `migrate` verb shares.
type migrateOptions struct {
	backend  backendFlags
	families string // comma-separated, or "all"
	from, to string
	run      string
	workers  int
	ranges   int
	// writersWait bounds how long run and cutover wait for the shop processes to apply a phase.
	writersWait time.Duration
	offline     bool // run with no shop process following the state (the shop is stopped)
	repair      bool // verify: copy the differing keys again from the old store
	explain     bool // verify: print both sides of each differing key
	rollback    bool // cutover: back to the old store
	progress    string
	maxRate     float64
}

// newCmdMigrate builds `migrate` and its verbs (MIG-1, docs/migration.md).
func newCmdMigrate(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Move data families (sessions, carts, history, events, catalog) from the embedded store or MongoDB to Cassandra with the shop running",
		Long: `Move a data family to Cassandra without losing a row while the shop keeps taking writes:

  plan     row counts, estimated time, the placement change
  run      dual writes on (every shop process runs serve --migrations), then a parallel,
           checkpointed, resumable backfill by key range
  verify   counts and per-range checksums on both sides; the differing keys; non-zero exit on any
  cutover  serve the family from Cassandra (needs a passing verify); --rollback goes back
  status   where each family stands

The old store's location comes from the usual flags (--data-dir, --mongo-uri), Cassandra's from
--cassandra-hosts and --cassandra-keyspace (schema applied with "shardmart cassandra schema apply").`,
	}
	o := &migrateOptions{}
	pf := cmd.PersistentFlags()
	o.backend.registerStores(pf)
	pf.StringVar(&o.families, "family", "", "families, comma-separated: sessions, carts, history, events, catalog, or all")
	pf.StringVar(&o.from, "from", "sqlite", "the old store: sqlite (the embedded store under --data-dir) or mongo (--mongo-uri)")
	pf.StringVar(&o.to, "to", "cassandra", "the new store: cassandra")
	pf.StringVar(&o.run, "run", "", "run name for checkpoints (default: the family's current run, else \"1\"); a new name copies everything again")
	pf.IntVar(&o.workers, "workers", 8, "ranges copied at once")
	pf.IntVar(&o.ranges, "ranges", 256, "key ranges a new run is cut into (from the keys' quantiles)")
	pf.DurationVar(&o.writersWait, "writers-wait", time.Minute, "how long run and cutover wait for every shop process to apply the new phase")
	pf.StringVar(&o.progress, "progress", "auto", "progress output: bar (terminal), lines, or auto")
	cmd.AddCommand(
		&cobra.Command{Use: "plan", Short: "Row counts, estimated time and the placement change", Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error { return migratePlan(c.Context(), stdio, o) }},
		migrateRunCmd(stdio, o),
		migrateVerifyCmd(stdio, o),
		migrateCutoverCmd(stdio, o),
		&cobra.Command{Use: "status", Short: "Where each family's migration stands", Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error { return migrateStatus(c.Context(), stdio, o) }},
	)
	return cmd
}

func migrateRunCmd(stdio IO, o *migrateOptions) *cobra.Command {
	c := &cobra.Command{Use: "run", Short: "Dual writes on, then the checkpointed backfill (resumes where a killed run stopped)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return migrateRun(c.Context(), stdio, o) }}
	c.Flags().Float64Var(&o.maxRate, "max-rows-per-sec", 0, "cap on rows copied per second, to spare a busy old store (0: none)")
	c.Flags().BoolVar(&o.offline, "offline", false, "proceed when no shop process follows the migration state (only when the shop is stopped)")
	return c
}

func migrateVerifyCmd(stdio IO, o *migrateOptions) *cobra.Command {
	c := &cobra.Command{Use: "verify", Short: "Compare both stores; exit status 1 on any difference", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return migrateVerify(c.Context(), stdio, o) }}
	c.Flags().BoolVar(&o.explain, "explain", false, "print both sides of each listed differing key (fields separated by |)")
	c.Flags().BoolVar(&o.repair, "repair", false, "copy each differing key again from the old store (the dual write's rule), then verify again")
	return c
}

func migrateCutoverCmd(stdio IO, o *migrateOptions) *cobra.Command {
	c := &cobra.Command{Use: "cutover", Short: "Serve the family from Cassandra (after a passing verify); --rollback returns it to the old store", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return migrateCutover(c.Context(), stdio, o) }}
	c.Flags().BoolVar(&o.rollback, "rollback", false, "return a cut-over family to the old store (phase copied: dual writes resume; verify again before the next cutover)")
	return c
}

// migrateEnv is what a verb opens: the old store as a reader, Cassandra as the target.
type migrateEnv struct {
	src      migrate.MirrorSource
	dst      *migrate.Target
	families []migrate.Family
	close    func()
}

func (o *migrateOptions) parseFamilies(all bool) ([]migrate.Family, error) {
	if o.families == "" && !all {
		return nil, errors.New("--family is required: sessions, carts, history, events, catalog, or all")
	}
	if o.families == "" || o.families == "all" {
		return migrate.Families, nil
	}
	var out []migrate.Family
	for _, name := range strings.Split(o.families, ",") {
		f, err := migrate.ParseFamily(strings.TrimSpace(name))
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// migrateSources open the old store by --from.
var migrateSources = map[string]func(ctx context.Context, o *migrateOptions) (migrate.MirrorSource, func() error, error){
	placement.SQLite: func(ctx context.Context, o *migrateOptions) (migrate.MirrorSource, func() error, error) {
		src, err := migrate.OpenSource(ctx, o.backend.sqlitePath())
		if err != nil {
			return nil, nil, err
		}
		src.Retention = o.backend.eventRetention
		return src, src.Close, nil
	},
	placement.Mongo: func(ctx context.Context, o *migrateOptions) (migrate.MirrorSource, func() error, error) {
		if o.backend.mongoURI == "" {
			return nil, nil, errors.New("--from mongo needs --mongo-uri")
		}
		src, err := migrate.OpenMongoSource(ctx, o.backend.mongoURI, o.backend.mongoDB)
		if err != nil {
			return nil, nil, err
		}
		src.Retention = o.backend.eventRetention
		// Range reads of carts and events by key need these (kept until dropped by hand:
		// docs/migration.md); building an existing index is a no-op.
		if err := src.EnsureIndexes(ctx); err != nil {
			src.Close()
			return nil, nil, err
		}
		return src, src.Close, nil
	},
}

func (o *migrateOptions) open(ctx context.Context, allFamilies bool) (*migrateEnv, error) {
	fams, err := o.parseFamilies(allFamilies)
	if err != nil {
		return nil, err
	}
	if o.to != placement.Cassandra {
		return nil, fmt.Errorf("--to %q: only cassandra", o.to)
	}
	openSrc, ok := migrateSources[o.from]
	if !ok {
		return nil, fmt.Errorf("--from %q: want sqlite or mongo", o.from)
	}
	src, closeSrc, err := openSrc(ctx, o)
	if err != nil {
		return nil, err
	}
	dst, closeDst, err := o.openTarget(ctx)
	if err != nil {
		closeSrc()
		return nil, err
	}
	return &migrateEnv{src: src, dst: dst, families: fams, close: func() { closeDst(); closeSrc() }}, nil
}

// openTarget connects to the shop's Cassandra keyspace.
func (o *migrateOptions) openTarget(ctx context.Context) (*migrate.Target, func(), error) {
	st, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: o.backend.hosts(), Keyspace: o.backend.cassandraKeyspace})
	if err != nil {
		return nil, nil, fmt.Errorf("open cassandra (apply the schema first: shardmart cassandra schema apply): %w", err)
	}
	dst := migrate.NewTarget(st.Session())
	dst.Retention = o.backend.eventRetention
	return dst, func() { st.Close() }, nil
}

// assumedRates are the plan's rows/s per family: the backfill's medians into one node with 4
// workers in docs/benchmarks.md (2 shared cores), rounded down. A cluster of real machines
// copies faster; a busy old store slower.
var assumedRates = map[migrate.Family]float64{migrate.Sessions: 10_000, migrate.Carts: 7_000,
	migrate.History: 11_000, migrate.Events: 17_000, migrate.Catalog: 3_000}

func migratePlan(ctx context.Context, stdio IO, o *migrateOptions) error {
	env, err := o.open(ctx, true)
	if err != nil {
		return err
	}
	defer env.close()
	states, err := env.dst.States(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FAMILY\tROWS\tESTIMATE\tPHASE\tPLACEMENT CHANGE")
	var total int64
	var all time.Duration
	for _, f := range env.families {
		n, err := env.src.Count(ctx, f)
		if err != nil {
			return err
		}
		total += n
		est := time.Duration(float64(n) / assumedRates[f] * float64(time.Second)).Round(time.Second)
		all += est
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s=%s -> %s=%s\n", f, n, est, phaseName(states[f].Phase), f, o.from, f, o.to)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "\n%d rows, about %s at the 1-node rates of docs/benchmarks.md. Steps: every shop process runs serve --migrations; then migrate run, verify, cutover per family.\n", total, all)
	return nil
}

func phaseName(p migrate.Phase) string {
	if p == migrate.PhaseNone {
		return "-"
	}
	return string(p)
}

// waitWriters waits for the shop processes to apply one of want to f and says who they are.
func (o *migrateOptions) waitWriters(ctx context.Context, stdio IO, env *migrateEnv, f migrate.Family, want ...migrate.Phase) error {
	ctx, cancel := context.WithTimeout(ctx, o.writersWait)
	defer cancel()
	ws, err := env.dst.WaitWriters(ctx, f, 500*time.Millisecond, want...)
	if err != nil {
		return err
	}
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	fmt.Fprintf(stdio.Err, "%s: %d shop process(es) apply %s: %s\n", f, len(ws), want[0], strings.Join(ids, ", "))
	return nil
}

func migrateRun(ctx context.Context, stdio IO, o *migrateOptions) error {
	env, err := o.open(ctx, false)
	if err != nil {
		return err
	}
	defer env.close()
	for _, f := range env.families {
		if err := o.runFamily(ctx, stdio, env, f); err != nil {
			return err
		}
	}
	return nil
}

func (o *migrateOptions) runFamily(ctx context.Context, stdio IO, env *migrateEnv, f migrate.Family) error {
	st, err := env.dst.State(ctx, f)
	if err != nil {
		return err
	}
	run := o.run
	switch st.Phase {
	case migrate.PhaseNone:
		ws, err := env.dst.Writers(ctx, f)
		if err != nil {
			return err
		}
		if len(ws) == 0 && !o.offline {
			return fmt.Errorf("%s: no shop process follows the migration state: start every shop process with serve --migrations (writes of one that does not are missed), or pass --offline if the shop is stopped", f)
		}
		if run == "" {
			run = "1"
		}
		if err := env.dst.SetState(ctx, migrate.PhaseNone, migrate.State{Family: f, Phase: migrate.DualWrite, Source: o.from, Run: run}); err != nil {
			return err
		}
		fmt.Fprintf(stdio.Err, "%s: dual writes on (run %s)\n", f, run)
	case migrate.DualWrite:
		if run != "" && run != st.Run {
			return fmt.Errorf("%s: run %s is in progress; resume it (omit --run) or finish it", f, st.Run)
		}
		if st.Source != o.from {
			return fmt.Errorf("%s: the migration in progress reads from %s, not %s", f, st.Source, o.from)
		}
		run = st.Run
		fmt.Fprintf(stdio.Err, "%s: resuming run %s\n", f, run)
	default:
		// Copied, verified or cut over: a rerun of `run --family all` after a kill goes on
		// with the families not yet copied.
		fmt.Fprintf(stdio.Err, "%s: already %s (run %s); nothing to copy\n", f, st.Phase, st.Run)
		return nil
	}
	if err := o.waitWriters(ctx, stdio, env, f, migrate.DualWrite); err != nil {
		return err
	}
	total, err := env.src.Count(ctx, f)
	if err != nil {
		return err
	}
	prog := o.newProgress(stdio, f, total)
	stats, err := migrate.Backfill(ctx, env.src, env.dst, f, migrate.Options{Run: run, Split: o.ranges, Workers: o.workers,
		MaxRate: o.maxRate, Progress: prog.update})
	prog.finish()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "%s: copied %d rows (%d expired, skipped) in %s, %.0f rows/s; %d of %d ranges were done before\n",
		f, stats.Rows, stats.Skipped, stats.Elapsed.Round(time.Millisecond), float64(stats.Rows)/max(stats.Elapsed.Seconds(), 1e-6), stats.Resume, stats.Ranges)
	st.Phase = migrate.Copied
	st.Run, st.Source, st.ChangedAt = run, o.from, time.Time{}
	return env.dst.SetState(ctx, migrate.DualWrite, st)
}

// progress shows a backfill: a bar with rows/s and ETA on a terminal, plain lines otherwise.
type progress struct {
	bar   *progressbar.ProgressBar
	out   io.Writer
	f     migrate.Family
	total int64
	last  time.Time
}

func (o *migrateOptions) newProgress(stdio IO, f migrate.Family, total int64) *progress {
	p := &progress{out: stdio.Err, f: f, total: total}
	bar := o.progress == "bar"
	if o.progress == "auto" {
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

func migrateVerify(ctx context.Context, stdio IO, o *migrateOptions) error {
	env, err := o.open(ctx, false)
	if err != nil {
		return err
	}
	defer env.close()
	var failed []string
	for _, f := range env.families {
		rep, err := migrate.Verify(ctx, env.src, env.dst, f, migrate.Options{Split: o.ranges})
		if errors.Is(err, migrate.ErrDifferences) && o.repair {
			fmt.Fprintf(stdio.Err, "%s: %d keys differ; copying them again from %s\n", f, len(rep.Diffs), o.from)
			if err := repair(ctx, env, f, rep.Diffs); err != nil {
				return err
			}
			rep, err = migrate.Verify(ctx, env.src, env.dst, f, migrate.Options{Split: o.ranges})
		}
		if err != nil && !errors.Is(err, migrate.ErrDifferences) {
			return err
		}
		printReport(stdio.Out, rep)
		if err != nil {
			failed = append(failed, string(f))
			if o.explain {
				if err := explain(ctx, stdio.Out, env, f, rep.Diffs); err != nil {
					return err
				}
			}
			continue
		}
		st, serr := env.dst.State(ctx, f)
		if serr != nil {
			return serr
		}
		if st.Phase == migrate.Copied {
			st.Phase, st.VerifiedAt, st.Rows, st.ChangedAt = migrate.Verified, time.Now().UTC(), int64(rep.SourceRows), time.Time{}
			if err := env.dst.SetState(ctx, migrate.Copied, st); err != nil {
				return err
			}
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
	sides, err := migrate.Explain(ctx, env.src, env.dst, f, keys)
	if err != nil {
		return err
	}
	for _, k := range keys {
		s := sides[k]
		fmt.Fprintf(w, "  %s\n    old store: %s\n    cassandra: %s\n", k, readable(s.Source), readable(s.Target))
	}
	return nil
}

func readable(canonical string) string {
	if canonical == "" {
		return "(none)"
	}
	return strings.ReplaceAll(strings.TrimSuffix(canonical, "\x1f"), "\x1f", " | ")
}

// repair copies each differing key again from the old store with the dual write's rule
// (read now, replace at now): the old store is the source of truth until cutover.
func repair(ctx context.Context, env *migrateEnv, f migrate.Family, diffs []migrate.Diff) error {
	m := &migrate.Mirror{Src: env.src, Dst: env.dst}
	for _, d := range diffs {
		var err error
		switch f {
		case migrate.Carts:
			err = repairCart(ctx, env, m, d.Key)
		default:
			err = m.Keys(ctx, f, d.Key)
		}
		if err != nil {
			return fmt.Errorf("repair %s %s: %w", f, d.Key, err)
		}
	}
	return nil
}

// repairCart finds the cart's owner on whichever side has it and mirrors the cart.
func repairCart(ctx context.Context, env *migrateEnv, m *migrate.Mirror, id string) error {
	rows, err := env.src.Read(ctx, migrate.Carts, migrate.Range{Lo: id, Hi: id + "\x00"})
	if err != nil {
		return err
	}
	var owner cart.Owner
	if len(rows) > 0 {
		owner = rows[0].Cart.Owner
	} else if owner, err = env.dst.CartOwner(ctx, id); err != nil {
		return err
	}
	return m.Carts(ctx, owner, id)
}

func migrateCutover(ctx context.Context, stdio IO, o *migrateOptions) error {
	env, err := o.open(ctx, false)
	if err != nil {
		return err
	}
	defer env.close()
	for _, f := range env.families {
		st, err := env.dst.State(ctx, f)
		if err != nil {
			return err
		}
		from, want := migrate.Verified, migrate.Cutover
		if o.rollback {
			// Copied: the copy is complete and dual writes resume, so a verify can pass again.
			from, want = migrate.Cutover, migrate.Copied
		}
		if st.Phase != from {
			if o.rollback {
				return fmt.Errorf("%s: %w: phase %s; only a cut-over family rolls back", f, migrate.ErrPhase, phaseName(st.Phase))
			}
			return fmt.Errorf("%s: %w: phase %s; cutover needs a passing verify first (migrate verify)", f, migrate.ErrPhase, phaseName(st.Phase))
		}
		st.Phase, st.ChangedAt = want, time.Time{}
		if o.rollback {
			st.Note = "rolled back " + time.Now().UTC().Format(time.RFC3339)
		}
		if err := env.dst.SetState(ctx, from, st); err != nil {
			return err
		}
		if err := o.waitWriters(ctx, stdio, env, f, want); err != nil {
			return err
		}
		if o.rollback {
			fmt.Fprintf(stdio.Out, "%s: rolled back: served from %s again, dual writes to Cassandra continue; run migrate verify before the next cutover\n", f, st.Source)
		} else {
			fmt.Fprintf(stdio.Out, "%s: cut over: served from Cassandra (placement %s=cassandra, kept across restarts by the migration state)\n", f, f)
		}
	}
	return nil
}

func migrateStatus(ctx context.Context, stdio IO, o *migrateOptions) error {
	dst, closeDst, err := o.openTarget(ctx)
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
	for _, f := range migrate.Families {
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
			writers[i] = fmt.Sprintf("%s=%s", w.ID, phaseName(w.Phase))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f, phaseName(s.Phase), dash(s.Source), dash(s.Run), ranges, rows, verified, dash(strings.Join(writers, " ")), dash(s.Note))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
