package readrouting

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Member states as replSetGetStatus reports them (stateStr).
const (
	StatePrimary   = "PRIMARY"
	StateSecondary = "SECONDARY"
)

// MemberLag is one replica-set member's measured replication lag.
type MemberLag struct {
	Shard string // replica set name
	Host  string
	State string // stateStr; only SECONDARY members serve secondary reads
	Lag   time.Duration
	Known bool // false when the member's optime could not be compared
}

// LagSnapshot is one measurement of every shard's secondaries.
type LagSnapshot struct {
	MeasuredAt time.Time
	Members    []MemberLag
	// Errors holds shards whose status could not be read: their lag is unknown.
	Errors map[string]string
}

// ReplSetStatus is the part of replSetGetStatus the lag computation needs.
type ReplSetStatus struct {
	Set     string         `bson:"set"`
	Date    time.Time      `bson:"date"`
	Members []MemberStatus `bson:"members"`
}

// MemberStatus is one entry of replSetGetStatus.members.
type MemberStatus struct {
	Name       string    `bson:"name"`
	StateStr   string    `bson:"stateStr"`
	OptimeDate time.Time `bson:"optimeDate"`
}

// LagFromStatus computes each member's lag behind the primary's last applied
// write (primary optimeDate − member optimeDate). Without a primary nothing
// is known: every member is reported with Known=false.
func LagFromStatus(st ReplSetStatus) []MemberLag {
	var primary *MemberStatus
	for i := range st.Members {
		if st.Members[i].StateStr == StatePrimary {
			primary = &st.Members[i]
		}
	}
	out := make([]MemberLag, 0, len(st.Members))
	for _, m := range st.Members {
		ml := MemberLag{Shard: st.Set, Host: m.Name, State: m.StateStr}
		if primary != nil && !m.OptimeDate.IsZero() && !primary.OptimeDate.IsZero() {
			ml.Known = true
			// A secondary can briefly report an optime past the primary's
			// heartbeat-derived one: that is zero lag, not negative.
			ml.Lag = max(primary.OptimeDate.Sub(m.OptimeDate), 0)
		}
		out = append(out, ml)
	}
	return out
}

// StatusSource reads one shard replica set's status.
type StatusSource interface {
	ReplSetStatus(ctx context.Context) (ReplSetStatus, error)
}

// DriverSource runs replSetGetStatus through a client connected to one shard
// replica set (not to mongos: mongos does not answer replSetGetStatus).
type DriverSource struct{ Client *mongo.Client }

// ReplSetStatus runs replSetGetStatus on admin.
func (s DriverSource) ReplSetStatus(ctx context.Context) (ReplSetStatus, error) {
	var st ReplSetStatus
	err := s.Client.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: int32(1)}}).Decode(&st)
	if err != nil {
		return st, fmt.Errorf("replSetGetStatus: %w", err)
	}
	return st, nil
}

// Monitor measures replication lag of every shard periodically and keeps the
// latest snapshot for the Policy. Safe for concurrent use.
type Monitor struct {
	sources  map[string]StatusSource // shard name → source
	interval time.Duration
	now      func() time.Time

	mu   sync.RWMutex
	snap LagSnapshot
}

// NewMonitor measures the given shards every interval (1 s suits 5 s budgets).
func NewMonitor(sources map[string]StatusSource, interval time.Duration) *Monitor {
	return &Monitor{sources: sources, interval: interval, now: time.Now}
}

// Snapshot returns the latest measurement (zero before the first one, which
// the Policy treats as unknown: primary).
func (m *Monitor) Snapshot() LagSnapshot {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.snap
}

// Measure takes one measurement of all shards now and stores it.
func (m *Monitor) Measure(ctx context.Context) LagSnapshot {
	names := make([]string, 0, len(m.sources))
	for n := range m.sources {
		names = append(names, n)
	}
	sort.Strings(names)
	snap := LagSnapshot{}
	for _, n := range names {
		st, err := m.sources[n].ReplSetStatus(ctx)
		if err != nil {
			if snap.Errors == nil {
				snap.Errors = map[string]string{}
			}
			snap.Errors[n] = err.Error()
			continue
		}
		if st.Set == "" {
			st.Set = n
		}
		snap.Members = append(snap.Members, LagFromStatus(st)...)
	}
	// Stamp after reading: the lag is at least as old as the slowest read.
	snap.MeasuredAt = m.now()
	m.mu.Lock()
	m.snap = snap
	m.mu.Unlock()
	return snap
}

// Run measures every interval until ctx is done; it returns ctx's error.
func (m *Monitor) Run(ctx context.Context) error {
	if m.interval <= 0 {
		return errors.New("readrouting: monitor interval must be positive")
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
