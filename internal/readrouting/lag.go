package readrouting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// Member states as replSetGetStatus reports them (stateStr).
const (
	StatePrimary   = "PRIMARY"
	StateSecondary = "SECONDARY"
	StateArbiter   = "ARBITER"
)

// Heartbeat document the Monitor writes on every set's primary (see the package doc).
const (
	HeartbeatDatabase   = "shardmart_monitor"
	HeartbeatCollection = "heartbeat"
	// DefaultHeartbeatInterval is how often the Monitor writes it: an idle primary's
	// lastAppliedWallTime is then never older than this (plus one write's latency).
	DefaultHeartbeatInterval = 500 * time.Millisecond
	// defaultMemberHeartbeat is replSetGetStatus's heartbeatIntervalMillis when a status
	// lacks it (MongoDB's default, settings.heartbeatIntervalMillis).
	defaultMemberHeartbeat = 2 * time.Second
)

// MemberLag is one replica-set member's measured replication lag.
type MemberLag struct {
	Shard string // replica set name
	Host  string
	State string // stateStr; only SECONDARY members serve secondary reads
	// Lag is how far the member's applied writes trail the primary's clock when the status was
	// taken (status date − member lastAppliedWallTime, never negative). It is filled whenever
	// the primary knows an applied time for the member, even an old one; only Known says it may
	// be relied on.
	Lag time.Duration
	// Measured: Lag was computed (the status had a date and an applied time for the member).
	// A frozen member stays Measured, its Lag growing, while it is no longer Known.
	Measured bool
	// Known: the member's lag may be used. False without a primary in the status, without an
	// applied time, and for an Unreachable or OldTerm member.
	Known bool
	// Unreachable: the primary has not heard from the member recently (health 0, or its last
	// heartbeat request is older than two heartbeat intervals). Such a member may be frozen or
	// partitioned while drivers and mongos still believe it a SECONDARY and pick it, so the
	// Policy sends reads to the primary while any member is Unreachable, whatever its stateStr.
	Unreachable bool
	// HeardAgo is the age of the member's last heartbeat request as the primary saw it (zero
	// for the member that answered the status, and when it never sent one).
	HeardAgo time.Duration
	// OldTerm: the member's last applied entry (optime.t) is from an earlier term than the
	// status's, or its term is not known yet (-1: the primary has had no heartbeat reply with an
	// optime from it, as in a set's first seconds). The status takes a member's optime from its
	// heartbeat replies (every 2 s), so after an election a member stays OldTerm for up to
	// one heartbeat. An OldTerm member may have applied nothing the current primary wrote, and its lastAppliedWallTime
	// cannot be trusted: a deposed primary resumed after a failover writes in its old term
	// before it learns of the new one (entries a rollback then undoes), and the primary keeps
	// the later time it reported (on 6.0.5 the figure even followed the primary's own clock
	// while the member's optime stayed put). Such a member's lag is never Known.
	OldTerm bool
}

// LagSnapshot is one measurement of every shard's secondaries.
type LagSnapshot struct {
	// MeasuredAt is when the round STARTED (the application's clock): every status in it was
	// taken at or after this instant, so now − MeasuredAt never understates the snapshot's age.
	MeasuredAt time.Time
	Members    []MemberLag
	// Errors holds shards whose status could not be read: their lag is unknown.
	Errors map[string]string
}

// Member returns the entry of host in the snapshot.
func (s LagSnapshot) Member(host string) (MemberLag, bool) {
	for _, m := range s.Members {
		if m.Host == host {
			return m, true
		}
	}
	return MemberLag{}, false
}

// ReplSetStatus is the part of replSetGetStatus the lag computation needs.
type ReplSetStatus struct {
	Set string `bson:"set"`
	// Date is the answering member's clock when it built the status (milliseconds).
	Date time.Time `bson:"date"`
	// Term is the answering member's current term (the primary's election term); 0 when absent.
	Term                    int64          `bson:"term"`
	HeartbeatIntervalMillis int64          `bson:"heartbeatIntervalMillis"`
	Members                 []MemberStatus `bson:"members"`
}

// MemberStatus is one entry of replSetGetStatus.members, as MongoDB 6.0.5 returns it.
type MemberStatus struct {
	Name     string  `bson:"name"`
	Health   float64 `bson:"health"` // 1 reachable, 0 not (stateStr is then "(not reachable/healthy)")
	StateStr string  `bson:"stateStr"`
	Self     bool    `bson:"self"`
	// OptimeDate is whole seconds (the optime's timestamp) and is zeroed for an unreachable
	// member; it is kept for logs only.
	OptimeDate time.Time `bson:"optimeDate"`
	// Optime is the member's applied optime from its last heartbeat reply; only its term is
	// used ({ts: 0, t: -1} for an unreachable member, and before the first reply with one).
	Optime struct {
		Term int64 `bson:"t"`
	} `bson:"optime"`
	// LastAppliedWallTime is the wall-clock time (ms) of the last oplog entry the member
	// applied, as written by the primary that created the entry; for other members it is what
	// they last reported (replSetUpdatePosition or heartbeats), kept while they are unreachable.
	LastAppliedWallTime time.Time `bson:"lastAppliedWallTime"`
	// LastHeartbeatRecv is when the answering member last received a heartbeat request from
	// this member. (lastHeartbeat is NOT a liveness signal: on 6.0.5 it advances to the deadline
	// of a request that timed out.)
	LastHeartbeatRecv time.Time `bson:"lastHeartbeatRecv"`
}

// LagFromStatus computes each member's lag from a status taken on the primary: the status
// date (the primary's clock) − the member's lastAppliedWallTime. Both come from the primary's
// clock, and the member holds every write whose wall time is at or before its applied time, so
// the lag is an upper bound of its staleness at that instant; the heartbeat document keeps it
// tight (a caught-up member is at most one heartbeat interval behind the date). Without a
// primary (or without a date) nothing is known: every member is reported with Known=false; nor
// is the lag of a member on an older term than the status's (OldTerm).
func LagFromStatus(st ReplSetStatus) []MemberLag {
	hasPrimary := false
	for _, m := range st.Members {
		hasPrimary = hasPrimary || m.StateStr == StatePrimary
	}
	hb := time.Duration(st.HeartbeatIntervalMillis) * time.Millisecond
	if hb <= 0 {
		hb = defaultMemberHeartbeat
	}
	out := make([]MemberLag, 0, len(st.Members))
	for _, m := range st.Members {
		ml := MemberLag{Shard: st.Set, Host: m.Name, State: m.StateStr}
		if !m.Self {
			if !m.LastHeartbeatRecv.IsZero() {
				ml.HeardAgo = max(st.Date.Sub(m.LastHeartbeatRecv), 0)
			}
			ml.Unreachable = m.Health != 1 || m.LastHeartbeatRecv.IsZero() || ml.HeardAgo > 2*hb
		}
		ml.OldTerm = st.Term > 0 && m.Optime.Term < st.Term
		if !st.Date.IsZero() && !m.LastAppliedWallTime.IsZero() {
			// A member can report an applied time past the date (clock skew between the
			// primaries that wrote the entries, or a reply racing the status): zero, not negative.
			ml.Lag = max(st.Date.Sub(m.LastAppliedWallTime), 0)
			ml.Measured = true
			ml.Known = hasPrimary && !ml.Unreachable && !ml.OldTerm
		}
		out = append(out, ml)
	}
	return out
}

// StatusSource reads one shard replica set's status.
type StatusSource interface {
	ReplSetStatus(ctx context.Context) (ReplSetStatus, error)
}

// Heartbeater is a StatusSource that can also write the heartbeat document on its set's
// primary; the Monitor's Run does so every HeartbeatInterval.
type Heartbeater interface {
	Heartbeat(ctx context.Context, set string, at time.Time) error
}

// DriverSource runs replSetGetStatus through a client connected to one shard
// replica set (not to mongos: mongos does not answer replSetGetStatus).
type DriverSource struct{ Client *mongo.Client }

// ReplSetStatus runs replSetGetStatus on admin, on the primary whatever the client's read
// preference: only the primary hears every member's replication progress as it happens.
func (s DriverSource) ReplSetStatus(ctx context.Context) (ReplSetStatus, error) {
	var st ReplSetStatus
	err := s.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: int32(1)}},
		options.RunCmd().SetReadPreference(readpref.Primary())).Decode(&st)
	if err != nil {
		return st, fmt.Errorf("replSetGetStatus: %w", err)
	}
	return st, nil
}

// Heartbeat upserts {_id: set, ts: at} into shardmart_monitor.heartbeat on the primary, w:1:
// it only has to advance the primary's lastAppliedWallTime; secondaries replicate it like any
// write.
func (s DriverSource) Heartbeat(ctx context.Context, set string, at time.Time) error {
	coll := s.Client.Database(HeartbeatDatabase).Collection(HeartbeatCollection,
		options.Collection().SetWriteConcern(writeconcern.W1()))
	_, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: set}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "ts", Value: at}}}}, options.UpdateOne().SetUpsert(true))
	if err != nil {
		return fmt.Errorf("heartbeat write: %w", err)
	}
	return nil
}

// Monitor measures replication lag of every shard periodically and keeps the
// latest snapshot for the Policy. Safe for concurrent use.
type Monitor struct {
	// HeartbeatInterval is how often Run writes the heartbeat document on the sources that
	// are Heartbeaters (default DefaultHeartbeatInterval). Set it before Run.
	HeartbeatInterval time.Duration
	// OplogInterval is how often Run reads the oplog window of the sources that are
	// OplogReaders (default DefaultOplogInterval). Set it before Run.
	OplogInterval time.Duration
	// Logger receives heartbeat and oplog-window failures and recoveries (default slog.Default()).
	Logger *slog.Logger

	sources  map[string]StatusSource // shard name → source
	interval time.Duration
	now      func() time.Time

	mu    sync.RWMutex
	snap  LagSnapshot
	sets  map[string]string      // source name → replica set name, from the last status
	oplog map[string]OplogWindow // source name → latest window
}

// NewMonitor measures the given shards every interval (1 s suits 5 s budgets).
func NewMonitor(sources map[string]StatusSource, interval time.Duration) *Monitor {
	return &Monitor{sources: sources, interval: interval, now: time.Now, HeartbeatInterval: DefaultHeartbeatInterval}
}

// Snapshot returns the latest measurement (zero before the first one, which
// the Policy treats as unknown: primary).
func (m *Monitor) Snapshot() LagSnapshot {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.snap
}

// Measure takes one measurement of all shards now, in parallel, and stores it.
func (m *Monitor) Measure(ctx context.Context) LagSnapshot {
	// Stamp at the START of the round: each status is taken at or after this instant, so the
	// Policy's age term (now − MeasuredAt) covers the time the reads themselves took.
	snap := LagSnapshot{MeasuredAt: m.now()}
	names := make([]string, 0, len(m.sources))
	for n := range m.sources {
		names = append(names, n)
	}
	sort.Strings(names)
	statuses := make([]ReplSetStatus, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], errs[i] = m.sources[n].ReplSetStatus(ctx)
		}()
	}
	wg.Wait()
	for i, n := range names {
		if errs[i] != nil {
			if snap.Errors == nil {
				snap.Errors = map[string]string{}
			}
			snap.Errors[n] = errs[i].Error()
			continue
		}
		st := statuses[i]
		if st.Set == "" {
			st.Set = n
		}
		snap.Members = append(snap.Members, LagFromStatus(st)...)
	}
	m.mu.Lock()
	m.snap = snap
	if m.sets == nil {
		m.sets = map[string]string{}
	}
	for i, n := range names {
		if errs[i] == nil && statuses[i].Set != "" {
			m.sets[n] = statuses[i].Set
		}
	}
	m.mu.Unlock()
	return snap
}

// Run measures every interval, writes the heartbeat document on every Heartbeater source
// every HeartbeatInterval, and reads the oplog window of every OplogReader source every
// OplogInterval, until ctx is done; it returns ctx's error.
func (m *Monitor) Run(ctx context.Context) error {
	if m.interval <= 0 {
		return errors.New("readrouting: monitor interval must be positive")
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	oplogs := false
	for name, src := range m.sources {
		if hb, ok := src.(Heartbeater); ok {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.heartbeats(ctx, name, hb)
			}()
		}
		_, ok := src.(OplogReader)
		oplogs = oplogs || ok
	}
	if oplogs {
		wg.Go(func() { m.oplogs(ctx) })
	}
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		// A round slower than the interval is stale anyway: cut it short so a
		// hung shard shows up as an error (primary reads), not as old data.
		rctx, cancel := context.WithTimeout(ctx, m.interval)
		m.Measure(rctx)
		cancel()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// heartbeats writes set's heartbeat document every HeartbeatInterval until ctx is done. A
// failing write (no primary, a monitor user without write access to shardmart_monitor) is
// logged once per outage; it never makes reads unsafe, only the measured lag of an idle set
// larger (up to the primary's 10 s no-op writer), hence more primary reads.
func (m *Monitor) heartbeats(ctx context.Context, set string, hb Heartbeater) {
	every := m.HeartbeatInterval
	if every <= 0 {
		every = DefaultHeartbeatInterval
	}
	log := m.Logger
	if log == nil {
		log = slog.Default()
	}
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		hctx, cancel := context.WithTimeout(ctx, every)
		err := hb.Heartbeat(hctx, set, m.now())
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			log.Warn("readrouting: heartbeat write failing: an idle set's lag will read high (more primary reads)",
				"set", set, "err", err)
		case err == nil && failing:
			failing = false
			log.Info("readrouting: heartbeat writes recovered", "set", set)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
