package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Options tune a backfill or a verify.
type Options struct {
	// Run names the checkpoints: a new name copies everything again (a replay), the same name resumes.
	Run string
	// Split is how many ranges a new run cuts the keys into (default 256), from the source's
	// key quantiles; a resumed run keeps the ranges of its first start.
	Split   int
	Workers int // ranges copied at once, default 4
	// MaxRate caps the rows written per second (0: no cap), to spare a busy production store.
	MaxRate float64
	// Progress, if set, is called after each range, from one goroutine at a time.
	Progress func(Progress)
	// AfterCheckpoint, if set, runs after each range's checkpoint is written (tests use it to
	// pace a run they kill).
	AfterCheckpoint func(Range)
	Now             func() time.Time
}

func (o *Options) defaults() {
	if o.Run == "" {
		o.Run = "default"
	}
	if o.Split <= 0 {
		o.Split = 256
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Progress is what a backfill reports after each range.
type Progress struct {
	Family             Family
	RangesDone, Ranges int
	Rows, Skipped      int64 // this run's, resumed ranges excluded
	RowsPerSec         float64
}

// Stats is a finished backfill: rows copied and skipped (expired) by this run, and ranges
// found already done by an earlier one.
type Stats struct {
	Rows, Skipped  int64
	Ranges, Resume int
	Elapsed        time.Duration
}

// Sink is the new store's side of a backfill: Cassandra (Target) or MongoDB (MongoTarget).
// It keeps the run's ranges and checkpoints itself, so they are as durable as the rows.
type Sink interface {
	// Write upserts rows under the store's ordering rule (a row never overwrites a later
	// change of its key) and returns how many it skipped as expired.
	Write(ctx context.Context, f Family, rows []Row, now time.Time) (skipped int, err error)
	// Plan fixes the split points of run's ranges of f at its first start (Target.Plan).
	Plan(ctx context.Context, run string, f Family, points []string) ([]string, error)
	// Checkpoints returns run's copied ranges of f by range id.
	Checkpoints(ctx context.Context, run string, f Family) (map[int]Checkpoint, error)
	checkpoint(ctx context.Context, run string, f Family, c Checkpoint) error
}

// Backfill copies family f from src to dst range by range with opts.Workers workers. A range's
// checkpoint is written only after all its writes were acknowledged, so a run killed at any
// point resumes with the ranges without a checkpoint, rewriting at most the ranges in flight;
// their writes are upserts of the same cells with the same timestamps, so nothing is duplicated.
func Backfill(ctx context.Context, src Reader, dst Sink, f Family, opts Options) (Stats, error) {
	opts.defaults()
	if _, err := codecOf(f); err != nil {
		return Stats{}, err
	}
	ranges, err := runRanges(ctx, src, dst, f, opts)
	if err != nil {
		return Stats{}, err
	}
	done, err := dst.Checkpoints(ctx, opts.Run, f)
	if err != nil {
		return Stats{}, err
	}
	var todo []Range
	for _, r := range ranges {
		if _, ok := done[r.ID]; !ok {
			todo = append(todo, r)
		}
	}
	st := Stats{Ranges: len(ranges), Resume: len(ranges) - len(todo)}
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var lim *rate.Limiter
	if opts.MaxRate > 0 {
		lim = rate.NewLimiter(rate.Limit(opts.MaxRate), max(1, int(opts.MaxRate)))
	}
	work := make(chan Range)
	var rows, skipped atomic.Int64
	var mu sync.Mutex
	finished := st.Resume
	var wg sync.WaitGroup
	for range min(opts.Workers, max(len(todo), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				n, sk, err := copyRange(ctx, src, dst, f, r, opts, lim)
				if err != nil {
					cancel(err)
					return
				}
				rows.Add(n)
				skipped.Add(sk)
				if opts.AfterCheckpoint != nil {
					opts.AfterCheckpoint(r)
				}
				if opts.Progress != nil {
					mu.Lock()
					finished++
					el := time.Since(start).Seconds()
					opts.Progress(Progress{Family: f, RangesDone: finished, Ranges: len(ranges), Rows: rows.Load(),
						Skipped: skipped.Load(), RowsPerSec: float64(rows.Load()) / max(el, 1e-6)})
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for _, r := range todo {
		select {
		case work <- r:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	st.Rows, st.Skipped, st.Elapsed = rows.Load(), skipped.Load(), time.Since(start)
	if err := context.Cause(ctx); err != nil {
		return st, fmt.Errorf("migrate: backfill %s: %w", f, err)
	}
	return st, nil
}

// runRanges returns the ranges of opts.Run: cut from the source's key quantiles at its first
// start and stored with the run, read back when it resumes.
func runRanges(ctx context.Context, src Reader, dst Sink, f Family, opts Options) ([]Range, error) {
	rs, err := src.Split(ctx, f, opts.Split)
	if err != nil {
		return nil, err
	}
	points := make([]string, 0, len(rs))
	for _, r := range rs[1:] {
		points = append(points, r.Lo)
	}
	points, err = dst.Plan(ctx, opts.Run, f, points)
	if err != nil {
		return nil, err
	}
	return SplitKeys(points), nil
}

func copyRange(ctx context.Context, src Reader, dst Sink, f Family, r Range, opts Options, lim *rate.Limiter) (rows, skipped int64, err error) {
	rs, err := src.Read(ctx, f, r)
	if err != nil {
		return 0, 0, err
	}
	if lim != nil {
		for left := len(rs); left > 0; {
			n := min(left, lim.Burst())
			if err := lim.WaitN(ctx, n); err != nil {
				return 0, 0, err
			}
			left -= n
		}
	}
	sk, err := dst.Write(ctx, f, rs, opts.Now())
	if err != nil {
		return 0, 0, err
	}
	n := int64(len(rs) - sk)
	return n, int64(sk), dst.checkpoint(ctx, opts.Run, f, Checkpoint{Range: r, Rows: n, Skipped: int64(sk), At: opts.Now().UTC()})
}

// Canonical is the encoding both sides of Verify hash: the fields the source holds, times in
// milliseconds (Cassandra's precision), map entries and cart lines sorted.
func Canonical(r Row) string {
	var c canon
	if fam := familyOf(r); fam != nil {
		fam.canonical(r, &c)
	}
	return c.b.String()
}

func rowHash(r Row) uint64 {
	h := sha256.Sum256([]byte(Canonical(r)))
	return binary.BigEndian.Uint64(h[:8])
}
