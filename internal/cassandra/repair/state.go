package repair

import (
	"context"
	"errors"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// The repairer keeps its state in four tables of its own, created by EnsureTables in a
// keyspace of the user's choice (by default the keyspace it repairs): a repair of any cluster
// cannot depend on shardmart's schema versions, and the tables must live where the repairer
// can write at QUORUM whatever that cluster holds.
var stateTables = []string{
	`CREATE TABLE IF NOT EXISTS %s.repair_runs (
    id            text PRIMARY KEY,
    keyspace_name text,
    tables        list<text>,
    state         text,
    incremental   boolean,
    segment_count int,
    created       timestamp,
    finished      timestamp
) WITH default_time_to_live = 7776000 AND comment = 'shardmart repair: runs (90 days)'`,
	`CREATE TABLE IF NOT EXISTS %s.repair_segments (
    run         text,
    id          int,
    start_token text,
    end_token   text,
    replicas    list<text>,
    state       text,
    attempts    int,
    last_error  text,
    duration_ms bigint,
    coordinator text,
    updated     timestamp,
    PRIMARY KEY ((run), id)
) WITH default_time_to_live = 7776000 AND comment = 'shardmart repair: segments of each run (90 days)'`,
	`CREATE TABLE IF NOT EXISTS %s.repair_lease (
    name   text PRIMARY KEY,
    holder text,
    host   text,
    pid    int,
    since  timestamp
) WITH gc_grace_seconds = 3600 AND comment = 'shardmart repair: who runs repairs now (LWT, TTL)'`,
	`CREATE TABLE IF NOT EXISTS %s.repair_tables (
    keyspace_name text,
    table_name    text,
    last_complete timestamp,
    run           text,
    PRIMARY KEY ((keyspace_name), table_name)
) WITH comment = 'shardmart repair: the last complete repair of each table'`,
}

// StateTableNames are the repairer's own tables, never repaired by it.
var StateTableNames = []string{"repair_runs", "repair_segments", "repair_lease", "repair_tables"}

// Run states.
const (
	RunRunning = "running"
	RunPaused  = "paused"
	RunAborted = "aborted"
	RunDone    = "done"
	RunFailed  = "failed" // finished with segments that failed every attempt
)

// Segment states.
const (
	SegPending = "pending"
	SegRunning = "running"
	SegDone    = "done"
	SegFailed  = "failed"
)

// RunInfo is a row of repair_runs.
type RunInfo struct {
	ID          string
	Keyspace    string
	Tables      []string
	State       string
	Incremental bool
	Segments    int
	Created     time.Time
	Finished    time.Time
}

// SegmentState is a row of repair_segments.
type SegmentState struct {
	Segment
	State       string
	Attempts    int
	LastError   string
	Duration    time.Duration
	Coordinator string
	Updated     time.Time
}

// Lease is the row saying who runs repairs on the cluster.
type Lease struct {
	Holder string
	Host   string
	PID    int
	Since  time.Time
}

// ErrLeaseHeld: another repairer holds the lease.
var ErrLeaseHeld = errors.New("another repairer holds the repair lease")

// LeaseHeldError names the holder.
type LeaseHeldError struct{ Lease Lease }

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%v: holder %s on host %s (pid %d) since %s", ErrLeaseHeld, e.Lease.Holder, e.Lease.Host, e.Lease.PID,
		e.Lease.Since.UTC().Format(time.RFC3339))
}

func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// Store reads and writes the state tables.
type Store struct {
	s  *gocql.Session
	ks string
}

// NewStore uses the tables in keyspace ks.
func NewStore(s *gocql.Session, ks string) *Store { return &Store{s: s, ks: ks} }

// q is a statement on the state tables. Every one is safe to send again (the conditional
// ones check for their own earlier success), so a coordinator that stops answering, such as
// a frozen replica, costs a retry on another node, not the run.
func (st *Store) q(stmt string, args ...any) *gocql.Query {
	return st.s.Query(fmt.Sprintf(stmt, st.ks), args...).Consistency(gocql.Quorum).SerialConsistency(gocql.Serial).
		Idempotent(true).RetryPolicy(&gocql.SimpleRetryPolicy{NumRetries: 3})
}

// EnsureTables creates the state tables if need be (the driver waits for schema agreement).
func (st *Store) EnsureTables(ctx context.Context) error {
	for _, t := range stateTables {
		if err := st.s.Query(fmt.Sprintf(t, st.ks)).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("create the repair state tables in %s: %w", st.ks, err)
		}
	}
	return nil
}

// CreateRun records a run and all its segments, pending.
func (st *Store) CreateRun(ctx context.Context, r RunInfo, segs []Segment) error {
	for _, sg := range segs {
		if err := st.q(`INSERT INTO %s.repair_segments (run, id, start_token, end_token, replicas, state, attempts, updated)
			VALUES (?, ?, ?, ?, ?, ?, 0, ?)`, r.ID, sg.ID, sg.Start, sg.End, sg.Replicas, SegPending, r.Created).
			WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("record segment %d of run %s: %w", sg.ID, r.ID, err)
		}
	}
	// The run row last: a run is only found (and resumed) once all its segments are written.
	if err := st.q(`INSERT INTO %s.repair_runs (id, keyspace_name, tables, state, incremental, segment_count, created)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, r.ID, r.Keyspace, r.Tables, r.State, r.Incremental, len(segs), r.Created).
		WithContext(ctx).Exec(); err != nil {
		return fmt.Errorf("record run %s: %w", r.ID, err)
	}
	return nil
}

const runColumns = "id, keyspace_name, tables, state, incremental, segment_count, created, finished"

func scanRun(sc interface{ Scan(...any) bool }, r *RunInfo) bool {
	return sc.Scan(&r.ID, &r.Keyspace, &r.Tables, &r.State, &r.Incremental, &r.Segments, &r.Created, &r.Finished)
}

// Runs lists every run, newest first.
func (st *Store) Runs(ctx context.Context) ([]RunInfo, error) {
	iter := st.q("SELECT " + runColumns + " FROM %s.repair_runs").WithContext(ctx).Iter()
	var out []RunInfo
	var r RunInfo
	for scanRun(iter, &r) {
		out = append(out, r)
		r = RunInfo{}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("list repair runs: %w", err)
	}
	sortRuns(out)
	return out, nil
}

// Run reads one run.
func (st *Store) Run(ctx context.Context, id string) (RunInfo, error) {
	var r RunInfo
	iter := st.q("SELECT "+runColumns+" FROM %s.repair_runs WHERE id = ?", id).WithContext(ctx).Iter()
	found := scanRun(iter, &r)
	if err := iter.Close(); err != nil {
		return r, fmt.Errorf("read repair run %s: %w", id, err)
	}
	if !found {
		return r, fmt.Errorf("repair run %s: %w", id, ErrNoRun)
	}
	return r, nil
}

// ErrNoRun: no run has that id.
var ErrNoRun = errors.New("no such repair run")

// Segments reads a run's segments in id order.
func (st *Store) Segments(ctx context.Context, run string) ([]SegmentState, error) {
	iter := st.q(`SELECT id, start_token, end_token, replicas, state, attempts, last_error, duration_ms, coordinator, updated
		FROM %s.repair_segments WHERE run = ?`, run).WithContext(ctx).Iter()
	var out []SegmentState
	var s SegmentState
	var ms int64
	for iter.Scan(&s.ID, &s.Start, &s.End, &s.Replicas, &s.State, &s.Attempts, &s.LastError, &ms, &s.Coordinator, &s.Updated) {
		s.Duration = time.Duration(ms) * time.Millisecond
		out = append(out, s)
		s, ms = SegmentState{}, 0
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read the segments of run %s: %w", run, err)
	}
	return out, nil
}

// SetSegment writes a segment's progress.
func (st *Store) SetSegment(ctx context.Context, run string, s SegmentState) error {
	err := st.q(`UPDATE %s.repair_segments SET state = ?, attempts = ?, last_error = ?, duration_ms = ?, coordinator = ?, updated = ?
		WHERE run = ? AND id = ?`, s.State, s.Attempts, s.LastError, s.Duration.Milliseconds(), s.Coordinator, s.Updated, run, s.ID).
		WithContext(ctx).Idempotent(true).Exec()
	if err != nil {
		return fmt.Errorf("record segment %d of run %s: %w", s.ID, run, err)
	}
	return nil
}

// SetRunState moves a run from one of the states in from to state (LWT, so a pause or an
// abort given meanwhile is never overwritten); it reports the state found when it did not
// apply.
func (st *Store) SetRunState(ctx context.Context, id, state string, finished time.Time, from ...string) (applied bool, found string, err error) {
	var fin any
	if !finished.IsZero() {
		fin = finished
	}
	applied, err = st.q("UPDATE %s.repair_runs SET state = ?, finished = ? WHERE id = ? IF state IN ?", state, fin, id, from).
		WithContext(ctx).ScanCAS(&found)
	if err != nil {
		return false, "", fmt.Errorf("set repair run %s %s: %w", id, state, err)
	}
	return applied, found, nil
}

const leaseName = "repair"

// Lease reads the lease; ok is false when nobody holds it.
func (st *Store) Lease(ctx context.Context) (l Lease, ok bool, err error) {
	err = st.q("SELECT holder, host, pid, since FROM %s.repair_lease WHERE name = ?", leaseName).
		Consistency(gocql.Serial).WithContext(ctx).Scan(&l.Holder, &l.Host, &l.PID, &l.Since)
	if errors.Is(err, gocql.ErrNotFound) {
		return l, false, nil
	}
	if err != nil {
		return l, false, fmt.Errorf("read the repair lease: %w", err)
	}
	return l, true, nil
}

// AcquireLease takes the lease for ttl if nobody holds it, or if it is held by takeOver (a
// holder known dead); otherwise it returns a *LeaseHeldError.
func (st *Store) AcquireLease(ctx context.Context, l Lease, ttl time.Duration, takeOver string) error {
	var cur Lease
	var name string
	var applied bool
	var err error
	if takeOver == "" {
		applied, err = st.q("INSERT INTO %s.repair_lease (name, holder, host, pid, since) VALUES (?, ?, ?, ?, ?) IF NOT EXISTS USING TTL ?",
			leaseName, l.Holder, l.Host, l.PID, l.Since, int(ttl.Seconds())).WithContext(ctx).
			ScanCAS(&name, &cur.Holder, &cur.Host, &cur.PID, &cur.Since)
	} else {
		applied, err = st.q("UPDATE %s.repair_lease USING TTL ? SET holder = ?, host = ?, pid = ?, since = ? WHERE name = ? IF holder = ?",
			int(ttl.Seconds()), l.Holder, l.Host, l.PID, l.Since, leaseName, takeOver).WithContext(ctx).ScanCAS(&cur.Holder)
		if err == nil && !applied {
			var held bool
			cur, held, err = st.Lease(ctx)
			if err == nil && !held { // expired meanwhile: take it the ordinary way
				return st.AcquireLease(ctx, l, ttl, "")
			}
		}
	}
	if err != nil {
		return fmt.Errorf("take the repair lease: %w", err)
	}
	if !applied && cur.Holder != l.Holder { // our own holder: a retried attempt that applied
		return &LeaseHeldError{Lease: cur}
	}
	return nil
}

// RenewLease extends the lease by ttl if l still holds it.
func (st *Store) RenewLease(ctx context.Context, l Lease, ttl time.Duration) error {
	var holder string
	applied, err := st.q("UPDATE %s.repair_lease USING TTL ? SET holder = ?, host = ?, pid = ?, since = ? WHERE name = ? IF holder = ?",
		int(ttl.Seconds()), l.Holder, l.Host, l.PID, l.Since, leaseName, l.Holder).WithContext(ctx).ScanCAS(&holder)
	if err != nil {
		return fmt.Errorf("renew the repair lease: %w", err)
	}
	if !applied {
		cur, _, err := st.Lease(ctx)
		if err != nil {
			return fmt.Errorf("repair lease lost: %w", err)
		}
		return fmt.Errorf("repair lease lost: %w", &LeaseHeldError{Lease: cur})
	}
	return nil
}

// ReleaseLease gives the lease up if l holds it.
func (st *Store) ReleaseLease(ctx context.Context, l Lease) error {
	var holder string
	if _, err := st.q("DELETE FROM %s.repair_lease WHERE name = ? IF holder = ?", leaseName, l.Holder).
		WithContext(ctx).ScanCAS(&holder); err != nil {
		return fmt.Errorf("release the repair lease: %w", err)
	}
	return nil
}

// SetTablesComplete records that run repaired the tables completely at t.
func (st *Store) SetTablesComplete(ctx context.Context, keyspace string, tables []string, t time.Time, run string) error {
	for _, tb := range tables {
		if err := st.q("UPDATE %s.repair_tables SET last_complete = ?, run = ? WHERE keyspace_name = ? AND table_name = ?",
			t, run, keyspace, tb).WithContext(ctx).Idempotent(true).Exec(); err != nil {
			return fmt.Errorf("record the repair of %s.%s: %w", keyspace, tb, err)
		}
	}
	return nil
}

// TablesComplete reads when each table of keyspace was last completely repaired.
func (st *Store) TablesComplete(ctx context.Context, keyspace string) (map[string]time.Time, error) {
	iter := st.q("SELECT table_name, last_complete FROM %s.repair_tables WHERE keyspace_name = ?", keyspace).WithContext(ctx).Iter()
	out := map[string]time.Time{}
	var (
		tb string
		t  time.Time
	)
	for iter.Scan(&tb, &t) {
		out[tb] = t
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("read the last repairs of %s: %w", keyspace, err)
	}
	return out, nil
}
