package readrouting

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func secondaries(lags ...time.Duration) LagSnapshot {
	s := LagSnapshot{MeasuredAt: t0}
	s.Members = append(s.Members, MemberLag{Shard: "shard1", Host: "p:27018", State: StatePrimary, Known: true})
	for i, l := range lags {
		s.Members = append(s.Members, MemberLag{Shard: "shard1", Host: "s" + string(rune('a'+i)), State: StateSecondary, Lag: l, Known: true})
	}
	return s
}

// RPL-1: the per-operation read table.
func TestTableMirrorsSeed000(t *testing.T) {
	want := map[Operation]time.Duration{
		OpOrderHistory: 10 * time.Second, OpOrderStatus: 5 * time.Second, OpOrderStatusPaid: 0,
		OpStock: 0, OpCategorySearch: 5 * time.Second, OpProductPage: 5 * time.Second,
		OpCheckoutPrice: 0, OpCart: 0,
	}
	rules := Table()
	if len(rules) != len(want) {
		t.Fatalf("table has %d rows, want %d", len(rules), len(want))
	}
	for _, r := range rules {
		if b, ok := want[r.Op]; !ok || b != r.Budget {
			t.Errorf("%s: budget %s, want %s", r.Op, r.Budget, b)
		}
	}
}

func TestDecide(t *testing.T) {
	p := NewPolicy() // max snapshot age 5 s
	// The arithmetic below was written for a 2 s uncertainty; the default (one heartbeat
	// interval) is checked by TestDefaultUncertaintyIsOneHeartbeatInterval.
	p.Uncertainty = 2 * time.Second
	tests := []struct {
		name   string
		op     Operation
		snap   LagSnapshot
		at     time.Time
		want   Target
		reason string
	}{
		{"paid status always primary", OpOrderStatusPaid, secondaries(0), t0, Primary, "primary-only"},
		{"stock always primary", OpStock, secondaries(0), t0, Primary, "primary-only"},
		{"checkout price always primary", OpCheckoutPrice, secondaries(0), t0, Primary, "primary-only"},
		{"cart always primary", OpCart, secondaries(0), t0, Primary, "primary-only"},
		{"unknown op primary", Operation("wishlist"), secondaries(0), t0, Primary, "primary-only"},
		{"history, fresh secondaries", OpOrderHistory, secondaries(time.Second, 3*time.Second), t0, Secondary, "<= budget 10s"},
		{"history, exactly at budget", OpOrderHistory, secondaries(8 * time.Second), t0, Secondary, "<= budget"},
		{"history, one secondary over budget", OpOrderHistory, secondaries(time.Second, 8*time.Second+time.Millisecond), t0, Primary, "> budget 10s"},
		{"status 5 s, lag 2 s + 2 s uncertainty", OpOrderStatus, secondaries(2 * time.Second), t0, Secondary, "4s <= budget 5s"},
		{"status 5 s, lag 3.5 s", OpOrderStatus, secondaries(3500 * time.Millisecond), t0, Primary, "5.5s > budget 5s"},
		{"search 5 s, snapshot 2 s old pushes over", OpCategorySearch, secondaries(2 * time.Second), t0.Add(2 * time.Second), Primary, "6s > budget"},
		{"product page 5 s, 1 s old snapshot", OpProductPage, secondaries(1 * time.Second), t0.Add(time.Second), Secondary, "4s <= budget"},
		{"no measurement yet", OpOrderHistory, LagSnapshot{}, t0, Primary, "not measured"},
		{"stale snapshot", OpOrderHistory, secondaries(0), t0.Add(6 * time.Second), Primary, "old"},
		{"no secondaries", OpOrderHistory, secondaries(), t0, Primary, "no secondary"},
		{"unknown member lag", OpOrderHistory, func() LagSnapshot {
			s := secondaries(time.Second)
			s.Members = append(s.Members, MemberLag{Shard: "shard2", Host: "x", State: StateSecondary})
			return s
		}(), t0, Primary, "unknown"},
		{"shard status unreadable", OpOrderHistory, func() LagSnapshot {
			s := secondaries(time.Second)
			s.Errors = map[string]string{"shard2": "connection refused"}
			return s
		}(), t0, Primary, "shard2 unknown"},
		// A driver may see it SECONDARY a heartbeat before the primary's status does.
		{"recovering member counts", OpOrderHistory, func() LagSnapshot {
			s := secondaries(time.Second)
			s.Members = append(s.Members, MemberLag{Shard: "shard1", Host: "r", State: "RECOVERING", Lag: time.Hour, Known: true})
			return s
		}(), t0, Primary, "> budget"},
		{"arbiter ignored", OpOrderHistory, func() LagSnapshot {
			s := secondaries(time.Second)
			s.Members = append(s.Members, MemberLag{Shard: "shard1", Host: "a", State: StateArbiter})
			return s
		}(), t0, Secondary, "<= budget"},
		{"worst across shards decides", OpOrderHistory, func() LagSnapshot {
			s := secondaries(time.Second)
			s.Members = append(s.Members, MemberLag{Shard: "shard2", Host: "y", State: StateSecondary, Lag: 9 * time.Second, Known: true})
			return s
		}(), t0, Primary, "11s > budget 10s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Decide(tt.op, tt.snap, tt.at)
			if d.Target != tt.want {
				t.Errorf("got %s (%s), want %s", d.Target, d.Reason, tt.want)
			}
			if !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("reason %q, want it to contain %q", d.Reason, tt.reason)
			}
		})
	}
}

func TestReadPref(t *testing.T) {
	p := NewPolicy()
	p.now = func() time.Time { return t0 }
	primary := p.ReadPref(OpStock, secondaries(0))
	if primary.Mode() != readpref.PrimaryMode {
		t.Errorf("stock: mode %s, want primary", primary.Mode())
	}
	sec := p.ReadPref(OpOrderHistory, secondaries(time.Second))
	if sec.Mode() != readpref.SecondaryPreferredMode {
		t.Errorf("history: mode %s, want secondaryPreferred", sec.Mode())
	}
	if ms, ok := sec.MaxStaleness(); !ok || ms != 90*time.Second {
		t.Errorf("history: maxStaleness %s (set %t), want the 90 s backstop", ms, ok)
	}
}

func TestLagFromStatus(t *testing.T) {
	// Lag is the status date (the primary's clock) − each member's lastAppliedWallTime.
	heard := t0.Add(-time.Second)
	st := ReplSetStatus{Set: "shard1", Date: t0, Members: []MemberStatus{
		{Name: "a:27018", Health: 1, Self: true, StateStr: StatePrimary, LastAppliedWallTime: t0.Add(-200 * time.Millisecond)},
		{Name: "b:27018", Health: 1, StateStr: StateSecondary, LastAppliedWallTime: t0.Add(-3 * time.Second), LastHeartbeatRecv: heard},
		{Name: "c:27018", Health: 1, StateStr: StateSecondary, LastAppliedWallTime: t0.Add(time.Second), LastHeartbeatRecv: heard}, // clock skew: ahead of the date
		{Name: "d:27018", Health: 1, StateStr: "STARTUP2", LastHeartbeatRecv: heard},
	}}
	got := LagFromStatus(st)
	want := []MemberLag{
		{Shard: "shard1", Host: "a:27018", State: StatePrimary, Lag: 200 * time.Millisecond, Measured: true, Known: true},
		{Shard: "shard1", Host: "b:27018", State: StateSecondary, Lag: 3 * time.Second, Measured: true, Known: true, HeardAgo: time.Second},
		{Shard: "shard1", Host: "c:27018", State: StateSecondary, Lag: 0, Measured: true, Known: true, HeardAgo: time.Second},
		{Shard: "shard1", Host: "d:27018", State: "STARTUP2", Known: false, HeardAgo: time.Second},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d members, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("member %d: got %+v want %+v", i, got[i], want[i])
		}
	}
	noPrimary := LagFromStatus(ReplSetStatus{Set: "s", Date: t0, Members: []MemberStatus{
		{Name: "b", Health: 1, Self: true, StateStr: StateSecondary, LastAppliedWallTime: t0}}})
	if noPrimary[0].Known {
		t.Error("without a primary, lag should be unknown")
	}
}

type fakeSource struct {
	st  ReplSetStatus
	err error
}

func (f fakeSource) ReplSetStatus(context.Context) (ReplSetStatus, error) { return f.st, f.err }

func TestMonitorMeasure(t *testing.T) {
	m := NewMonitor(map[string]StatusSource{
		"shard1": fakeSource{st: ReplSetStatus{Set: "shard1", Date: t0, Members: []MemberStatus{
			{Name: "a", Health: 1, Self: true, StateStr: StatePrimary, LastAppliedWallTime: t0},
			{Name: "b", Health: 1, StateStr: StateSecondary, LastAppliedWallTime: t0.Add(-time.Second), LastHeartbeatRecv: t0},
		}}},
		"shard2": fakeSource{err: errors.New("connection refused")},
	}, time.Second)
	m.now = func() time.Time { return t0 }
	if !m.Snapshot().MeasuredAt.IsZero() {
		t.Fatal("snapshot before the first measurement should be zero")
	}
	snap := m.Measure(context.Background())
	if snap.MeasuredAt != t0 || len(snap.Members) != 2 || snap.Errors["shard2"] == "" {
		t.Errorf("snapshot %+v, want 2 members of shard1 and an error for shard2", snap)
	}
	if d := NewPolicy().Decide(OpOrderHistory, m.Snapshot(), t0); d.Target != Primary {
		t.Errorf("with shard2 unreadable: %s (%s), want primary", d.Target, d.Reason)
	}
}

func TestMonitorRunStopsOnCancel(t *testing.T) {
	m := NewMonitor(map[string]StatusSource{"s": fakeSource{}}, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := m.Run(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run returned %v, want the context's error", err)
	}
	if m.Snapshot().MeasuredAt.IsZero() {
		t.Error("Run never measured")
	}
}

func TestShardURI(t *testing.T) {
	tests := []struct {
		uri, host, want string
		wantErr         bool
	}{
		{"mongodb://localhost:27017", "shard1/shard1-a:27018,shard1-b:27018", "mongodb://shard1-a:27018,shard1-b:27018/?replicaSet=shard1", false},
		{"mongodb://admin:s3cret@mongos:27017/?authSource=admin", "rs2/h:1", "mongodb://admin:s3cret@h:1/?authSource=admin&replicaSet=rs2", false},
		{"mongodb+srv://cluster.example.net", "rs/h:1", "", true},
		{"mongodb://localhost", "standalone:27018", "", true},
	}
	for _, tt := range tests {
		got, err := ShardURI(tt.uri, tt.host)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ShardURI(%q, %q) = %q, %v; want %q (err %t)", tt.uri, tt.host, got, err, tt.want, tt.wantErr)
		}
	}
}
