package readrouting

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestDecisionOutcome(t *testing.T) {
	p := NewPolicy()
	tests := []struct {
		op   Operation
		snap LagSnapshot
		want string
	}{
		{OpProductPage, secondaries(time.Second), OutcomeSecondary},
		{OpProductPage, secondaries(time.Second, 8*time.Second), OutcomePrimaryNoFreshMember}, // 8 s > the 5 s budget
		{OpOrderHistory, secondaries(8 * time.Second), OutcomeSecondary},                      // within 10 s
		{OpOrderHistory, LagSnapshot{}, OutcomePrimaryNoFreshMember},                          // lag not measured
		{OpStock, secondaries(0), OutcomePrimaryByRule},
		{"unknown.op", secondaries(0), OutcomePrimaryByRule},
	}
	for _, tt := range tests {
		if got := p.Decide(tt.op, tt.snap, t0).Outcome(); got != tt.want {
			t.Errorf("%s: outcome %s, want %s", tt.op, got, tt.want)
		}
	}
}

// oplogSource is a fakeSource whose set also answers its oplog window.
type oplogSource struct {
	fakeSource
	w   OplogWindow
	err error
}

func (o oplogSource) OplogWindow(context.Context) (OplogWindow, error) { return o.w, o.err }

func TestMetrics(t *testing.T) {
	m := NewMonitor(map[string]StatusSource{
		// A source named by its shard id whose status names the set: the set name labels both.
		"shard-a": oplogSource{fakeSource: fakeSource{st: ReplSetStatus{Set: "rs0", Date: t0, Members: []MemberStatus{
			{Name: "p:1", Health: 1, Self: true, StateStr: StatePrimary, LastAppliedWallTime: t0.Add(-250 * time.Millisecond)},
			{Name: "s:2", Health: 1, StateStr: StateSecondary, LastAppliedWallTime: t0.Add(-90 * time.Second), LastHeartbeatRecv: t0},
			{Name: "a:3", Health: 1, StateStr: StateArbiter, LastHeartbeatRecv: t0},
		}}}, w: OplogWindow{First: t0.Add(-time.Hour), Last: t0}},
		"rs1": oplogSource{err: errors.New("not authorized on local")},
	}, time.Second)
	m.now = func() time.Time { return t0 }
	m.Measure(context.Background())
	if errs := m.MeasureOplogs(context.Background()); len(errs) != 1 || errs["rs1"] == nil {
		t.Fatalf("oplog errors %v, want rs1's alone", errs)
	}
	x := NewMetrics()
	x.now = func() time.Time { return t0.Add(1500 * time.Millisecond) }
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(x)
	p := NewPolicy()
	for _, op := range []Operation{OpProductPage, OpProductPage, OpOrderHistory, OpStock} {
		x.Observe(p.Decide(op, secondaries(7*time.Second), t0))
	}
	x.Watch(m)
	want := `
# HELP shardmart_read_routing_reads_total ` + readsHelp + `
# TYPE shardmart_read_routing_reads_total counter
shardmart_read_routing_reads_total{budget_seconds="0",family="products",op="products.stock",outcome="primary_by_rule"} 1
shardmart_read_routing_reads_total{budget_seconds="10",family="orders",op="orders.history",outcome="secondary"} 1
shardmart_read_routing_reads_total{budget_seconds="5",family="products",op="products.page",outcome="primary_no_fresh_member"} 2
# HELP shardmart_mongo_member_lag_seconds ` + memberLagHelp + `
# TYPE shardmart_mongo_member_lag_seconds gauge
shardmart_mongo_member_lag_seconds{member="p:1",set="rs0"} 0.25
shardmart_mongo_member_lag_seconds{member="s:2",set="rs0"} 90
# HELP shardmart_mongo_oplog_window_seconds ` + oplogHelp + `
# TYPE shardmart_mongo_oplog_window_seconds gauge
shardmart_mongo_oplog_window_seconds{set="rs0"} 3600
# HELP shardmart_mongo_member_oplog_headroom_seconds ` + headroomHelp + `
# TYPE shardmart_mongo_member_oplog_headroom_seconds gauge
shardmart_mongo_member_oplog_headroom_seconds{member="p:1",set="rs0"} 3599.75
shardmart_mongo_member_oplog_headroom_seconds{member="s:2",set="rs0"} 3510
# HELP shardmart_read_routing_lag_snapshot_age_seconds ` + snapshotAgeHelp + `
# TYPE shardmart_read_routing_lag_snapshot_age_seconds gauge
shardmart_read_routing_lag_snapshot_age_seconds 1.5
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestBehindPrimary(t *testing.T) {
	st := ReplSetStatus{Set: "rs0", Date: t0, Members: []MemberStatus{
		{Name: "p", StateStr: StatePrimary, LastAppliedWallTime: t0.Add(-8 * time.Second)}, // idle: its last write 8 s ago
		{Name: "s", StateStr: StateSecondary, LastAppliedWallTime: t0.Add(-8 * time.Second)},
		{Name: "f", StateStr: StateSecondary, LastAppliedWallTime: t0.Add(-20 * time.Second)},
		{Name: "ahead", StateStr: StateSecondary, LastAppliedWallTime: t0.Add(-7 * time.Second)}, // a reply racing the status
		{Name: "a", StateStr: StateArbiter},
		{Name: "new", StateStr: "STARTUP2"},
	}}
	got := BehindPrimary(st)
	want := map[string]time.Duration{"p": 0, "s": 0, "f": 12 * time.Second, "ahead": 0}
	if !maps.Equal(got, want) {
		t.Errorf("BehindPrimary = %v, want %v", got, want)
	}
	st.Members[0].StateStr = StateSecondary
	if got := BehindPrimary(st); got != nil {
		t.Errorf("without a primary: %v, want nothing", got)
	}
}
