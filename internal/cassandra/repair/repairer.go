// Package repair runs anti-entropy repair on any Cassandra cluster the way Cassandra Reaper
// does: the ring is cut into token-range segments, each repaired with
// `nodetool repair -st S -et E` on one of its replicas, at most one segment per node at a time,
// with a pause after each (intensity), a timeout, retries with backoff, and the run's state in
// tables of its own so that a restarted repairer resumes where a dead one stopped. A lease row
// (LWT with a TTL) keeps two repairers off one cluster. nodetool reaches the nodes over JMX
// (Targets); CQL reads the ring and the tables and holds the state.
package repair

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// DefaultSkip are the tables a repair leaves out when none are named: sessions and click
// events (launcher.DefaultRepairSkip says why).
var DefaultSkip = launcher.DefaultRepairSkip

// Options choose what a repair run repairs and how hard it pushes.
type Options struct {
	Keyspace string
	Tables   []string // empty: every table of Keyspace except those matching Skip
	Skip     []string // path.Match patterns
	// Incremental runs incremental subrange repair (anticompaction, repaired/unrepaired sets);
	// false runs full subrange repair, which compares all data.
	Incremental bool
	Segments    int // about this many segments over the ring, at least one per token range; default 64
	Parallelism int // segments at once, on disjoint replica sets; default 1
	// Intensity in (0,1]: after a segment that took t, its replicas rest t*(1-i)/i. Default 1.
	Intensity      float64
	SegmentTimeout time.Duration // default 30 minutes
	MaxAttempts    int           // per segment, default 5
	Backoff        time.Duration // before the second attempt, doubled after each; default 30 s, at most 10 minutes
	LeaseTTL       time.Duration // default 60 s, renewed every third of it
	Poll           time.Duration // how often a paused or waiting run reads its state; default 2 s
	Logger         *slog.Logger
	Metrics        *Metrics
}

func (o *Options) defaults() error {
	if o.Keyspace == "" {
		return errors.New("repair: keyspace is required")
	}
	if o.Segments <= 0 {
		o.Segments = 64
	}
	if o.Parallelism <= 0 {
		o.Parallelism = 1
	}
	if o.Intensity == 0 {
		o.Intensity = 1
	}
	if o.Intensity <= 0 || o.Intensity > 1 {
		return fmt.Errorf("repair: intensity %v: want a number in (0, 1]", o.Intensity)
	}
	if o.SegmentTimeout <= 0 {
		o.SegmentTimeout = 30 * time.Minute
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = 30 * time.Second
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 60 * time.Second
	}
	if o.LeaseTTL < 3*time.Second {
		return fmt.Errorf("repair: lease TTL %s: want at least 3s", o.LeaseTTL)
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Repairer repairs one cluster: CQL session s (ring, tables, state in store) and nodetool
// through nt against targets.
type Repairer struct {
	s       *gocql.Session
	store   *Store
	nt      Nodetool
	targets map[string]Target
	o       Options
	me      Lease
}

// New validates o; nothing runs yet.
func New(s *gocql.Session, store *Store, nt Nodetool, targets []Target, o Options) (*Repairer, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	me := Lease{Host: host, PID: os.Getpid(), Holder: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))}
	tm := map[string]Target{}
	for _, t := range targets {
		tm[t.Node] = t
	}
	return &Repairer{s: s, store: store, nt: nt, targets: tm, o: o, me: me}, nil
}

// Holder is the lease holder id of this repairer.
func (r *Repairer) Holder() string { return r.me.Holder }

// Result is what a run did.
type Result struct {
	Run      string
	Tables   []string
	Resumed  bool // an unfinished run was taken up
	Segments int
	Done     int // segments done, by this repairer or an earlier one
	Repaired int // segments this repairer repaired
	Failed   int
	State    string
	Took     time.Duration
}

// ErrAborted: the run was aborted (`cassandra repair abort`).
var ErrAborted = errors.New("repair run aborted")

// Run takes the lease, resumes the keyspace's unfinished run or starts a new one, and repairs
// until every segment is done or failed, the run is aborted, or ctx ends. A failed segment
// (every attempt failed) fails the run, after the others are done.
func (r *Repairer) Run(ctx context.Context) (Result, error) {
	start := time.Now()
	if err := r.store.EnsureTables(ctx); err != nil {
		return Result{}, err
	}
	release, ctx, err := r.lease(ctx)
	if err != nil {
		return Result{}, err
	}
	defer release()
	res, err := r.run(ctx)
	res.Took = time.Since(start)
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	return res, err
}

func (r *Repairer) run(ctx context.Context) (Result, error) {
	log := r.o.Logger.With("keyspace", r.o.Keyspace)
	gcGrace, err := r.gcGrace(ctx)
	if err != nil {
		return Result{}, err
	}
	last, err := r.store.TablesComplete(ctx, r.o.Keyspace)
	if err != nil {
		return Result{}, err
	}
	run, resumed, err := r.currentRun(ctx, gcGrace)
	if err != nil {
		return Result{}, err
	}
	covered := map[string]int{}
	for _, tb := range run.Tables {
		covered[tb] = gcGrace[tb]
	}
	r.o.Metrics.tables(r.o.Keyspace, covered, last)
	segs, err := r.store.Segments(ctx, run.ID)
	if err != nil {
		return Result{}, err
	}
	res := Result{Run: run.ID, Tables: run.Tables, Resumed: resumed, Segments: len(segs)}
	log = log.With("run", run.ID)
	log.Info("repair run", "resumed", resumed, "segments", len(segs), "tables", strings.Join(run.Tables, ","))
	if err := r.execute(ctx, run, segs, &res, log); err != nil {
		res.State = RunRunning
		if errors.Is(err, ErrAborted) {
			res.State = RunAborted
		}
		return res, err
	}
	state := RunDone
	if res.Failed > 0 {
		state = RunFailed
	}
	now := time.Now()
	applied, found, err := r.store.SetRunState(ctx, run.ID, state, now, RunRunning)
	if err != nil {
		return res, err
	}
	applied = applied || found == state // a retried attempt of this very change
	if !applied {
		res.State = found
		if found == RunAborted {
			return res, fmt.Errorf("run %s: %w", run.ID, ErrAborted)
		}
		return res, fmt.Errorf("run %s is %s, not running: not finished", run.ID, found)
	}
	res.State = state
	if state == RunFailed {
		return res, fmt.Errorf("run %s: %d of %d segments failed every attempt (repair_segments.last_error says why)", run.ID, res.Failed, len(segs))
	}
	if err := r.store.SetTablesComplete(ctx, r.o.Keyspace, run.Tables, run.Created, run.ID); err != nil {
		return res, err
	}
	// Staleness counts from the run's start: a write before it may have been missed by a
	// replica until the segment holding it was repaired, which was at the latest now.
	r.o.Metrics.completed(r.o.Keyspace, run.Tables, run.Created)
	log.Info("repair run done", "segments", len(segs), "repaired_now", res.Repaired)
	return res, nil
}

// Observe reads the keyspace's tables, their gc_grace_seconds and last complete repairs into
// the metrics, so a long-lived repairer exports staleness before its first run.
func (r *Repairer) Observe(ctx context.Context) error {
	gcGrace, err := r.gcGrace(ctx)
	if err != nil {
		return err
	}
	if err := r.store.EnsureTables(ctx); err != nil {
		return err
	}
	last, err := r.store.TablesComplete(ctx, r.o.Keyspace)
	if err != nil {
		return err
	}
	tables, err := r.tables(gcGrace)
	if err != nil {
		return err
	}
	covered := map[string]int{}
	for _, tb := range tables {
		covered[tb] = gcGrace[tb]
	}
	r.o.Metrics.tables(r.o.Keyspace, covered, last)
	return nil
}

// currentRun is the keyspace's unfinished run, or a new one over the ring as it is now.
func (r *Repairer) currentRun(ctx context.Context, gcGrace map[string]int) (RunInfo, bool, error) {
	runs, err := r.store.Runs(ctx)
	if err != nil {
		return RunInfo{}, false, err
	}
	for _, run := range runs {
		if run.Keyspace == r.o.Keyspace && (run.State == RunRunning || run.State == RunPaused) {
			return run, true, nil
		}
	}
	tables, err := r.tables(gcGrace)
	if err != nil {
		return RunInfo{}, false, err
	}
	ring, err := ReadRing(ctx, r.s, r.o.Keyspace)
	if err != nil {
		return RunInfo{}, false, err
	}
	ranges, err := ring.Ranges()
	if err != nil {
		return RunInfo{}, false, err
	}
	segs := Split(ranges, r.o.Segments)
	for _, sg := range segs {
		if len(sg.Replicas) < 2 {
			return RunInfo{}, false, fmt.Errorf("keyspace %s: range (%s, %s] has %d replica(s): nothing to compare, no repair", r.o.Keyspace, sg.Start, sg.End, len(sg.Replicas))
		}
		if !slices.ContainsFunc(sg.Replicas, func(n string) bool { _, ok := r.targets[n]; return ok }) {
			return RunInfo{}, false, fmt.Errorf("range (%s, %s]: no JMX target for any of its replicas %v (targets name %v)", sg.Start, sg.End, sg.Replicas, r.targetNodes())
		}
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	now := time.Now().UTC()
	run := RunInfo{ID: now.Format("20060102T150405Z") + "-" + hex.EncodeToString(b), Keyspace: r.o.Keyspace, Tables: tables,
		State: RunRunning, Incremental: r.o.Incremental, Segments: len(segs), Created: now.Truncate(time.Millisecond)}
	if err := r.store.CreateRun(ctx, run, segs); err != nil {
		return RunInfo{}, false, err
	}
	return run, false, nil
}

func (r *Repairer) targetNodes() []string {
	var out []string
	for n := range r.targets {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// gcGrace reads every table of the keyspace and its gc_grace_seconds.
func (r *Repairer) gcGrace(ctx context.Context) (map[string]int, error) {
	iter := r.s.Query("SELECT table_name, gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = ?", r.o.Keyspace).
		WithContext(ctx).Iter()
	out := map[string]int{}
	var (
		name string
		g    int
	)
	for iter.Scan(&name, &g) {
		out[name] = g
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", r.o.Keyspace, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("keyspace %s has no tables (or does not exist)", r.o.Keyspace)
	}
	return out, nil
}

// tables are the named tables, or every table but the skipped ones and the repairer's own.
func (r *Repairer) tables(gcGrace map[string]int) ([]string, error) {
	if len(r.o.Tables) > 0 {
		for _, t := range r.o.Tables {
			if _, ok := gcGrace[t]; !ok {
				return nil, fmt.Errorf("keyspace %s has no table %s", r.o.Keyspace, t)
			}
		}
		return slices.Sorted(slices.Values(r.o.Tables)), nil
	}
	var out []string
next:
	for t := range gcGrace {
		if slices.Contains(StateTableNames, t) {
			continue
		}
		for _, p := range r.o.Skip {
			if ok, _ := path.Match(p, t); ok {
				continue next
			}
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("keyspace %s has no table to repair (skip %v)", r.o.Keyspace, r.o.Skip)
	}
	slices.Sort(out)
	return out, nil
}

// lease takes the lease (or takes over one left by a dead repairer on this host) and keeps it
// renewed; the returned context ends, with the reason as its cause, if the lease is lost.
func (r *Repairer) lease(ctx context.Context) (release func(), _ context.Context, err error) {
	r.me.Since = time.Now().UTC().Truncate(time.Millisecond)
	err = r.store.AcquireLease(ctx, r.me, r.o.LeaseTTL, "")
	var held *LeaseHeldError
	if errors.As(err, &held) && r.deadOnThisHost(held.Lease) {
		r.o.Logger.Warn("taking over the repair lease of a repairer that died on this host", "holder", held.Lease.Holder, "pid", held.Lease.PID)
		err = r.store.AcquireLease(ctx, r.me, r.o.LeaseTTL, held.Lease.Holder)
	}
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		every := r.o.LeaseTTL / 3
		t := time.NewTicker(every)
		defer t.Stop()
		renewed := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, every)
			err := r.store.RenewLease(rctx, r.me, r.o.LeaseTTL)
			rcancel()
			var held *LeaseHeldError
			switch {
			case err == nil:
				renewed = time.Now()
			case errors.As(err, &held), time.Since(renewed) > r.o.LeaseTTL-every:
				// Lost, or about to expire unrenewed: stop before another repairer may start.
				cancel(err)
				return
			default:
				r.o.Logger.Warn("repair lease not renewed; trying again", "err", err)
			}
		}
	}()
	return func() {
		cancel(nil)
		<-stopped
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer rcancel()
		if err := r.store.ReleaseLease(rctx, r.me); err != nil {
			r.o.Logger.Warn("repair lease not released (it expires by itself)", "err", err, "ttl", r.o.LeaseTTL)
		}
	}, ctx, nil
}

// deadOnThisHost: the holder ran on this host and its process is gone (SIGKILL, a crash), so
// waiting for its lease to expire would only delay the resume.
func (r *Repairer) deadOnThisHost(l Lease) bool {
	if l.Host != r.me.Host || l.PID <= 0 || l.PID == r.me.PID {
		return false
	}
	return errors.Is(syscall.Kill(l.PID, 0), syscall.ESRCH)
}

func sortRuns(runs []RunInfo) {
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].Created.After(runs[j].Created) })
}
