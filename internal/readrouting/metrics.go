package readrouting

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names of the read routing and of what its Monitor measures (docs/mongodb.md,
// "Seeing the read routing and the oplog"; deploy/monitoring/rules/shardmart-replication.rules.yml).
const (
	MetricReads         = "shardmart_read_routing_reads_total"
	MetricSnapshotAge   = "shardmart_read_routing_lag_snapshot_age_seconds"
	MetricMemberLag     = "shardmart_mongo_member_lag_seconds"
	MetricOplogWindow   = "shardmart_mongo_oplog_window_seconds"
	MetricOplogHeadroom = "shardmart_mongo_member_oplog_headroom_seconds"
)

const (
	readsHelp       = "Reads routed by the staleness table, by family, operation, staleness budget in seconds (0: primary only) and outcome: secondary, primary_no_fresh_member (the read had a budget but no secondary could be vouched for within it), primary_by_rule."
	memberLagHelp   = "Replication lag of each replica-set member as the read routing last measured it on the set's primary: status date − the member's lastAppliedWallTime; it keeps growing while the primary does not hear from the member."
	oplogHelp       = "Span of the replica set's oplog on its primary: ts of the last entry − ts of the first (db.getReplicationInfo's timeDiff), whole seconds."
	headroomHelp    = "Oplog window − the member's lag: how much further the member can fall behind before the primary's oplog no longer holds what it needs next (≤ 0: it needs a full resync)."
	snapshotAgeHelp = "Age of the lag snapshot the read routing decides by; reads with a budget go to the primary once it is older than the policy's limit (5 s)."
)

var (
	memberLagDesc     = prometheus.NewDesc(MetricMemberLag, memberLagHelp, []string{"set", "member"}, nil)
	oplogWindowDesc   = prometheus.NewDesc(MetricOplogWindow, oplogHelp, []string{"set"}, nil)
	oplogHeadroomDesc = prometheus.NewDesc(MetricOplogHeadroom, headroomHelp, []string{"set", "member"}, nil)
	snapshotAgeDesc   = prometheus.NewDesc(MetricSnapshotAge, snapshotAgeHelp, nil, nil)
)

// Metrics is the read routing's Prometheus collector: a counter of routed reads (Observe each
// Decision) and, once a Monitor is watched, its latest measurements read at scrape time, so a
// scrape never queries MongoDB. Register it once per registry.
type Metrics struct {
	reads *prometheus.CounterVec
	mon   atomic.Pointer[Monitor]
	now   func() time.Time
}

// NewMetrics makes the collector; nothing is registered.
func NewMetrics() *Metrics {
	return &Metrics{
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricReads, Help: readsHelp},
			[]string{"family", "op", "budget_seconds", "outcome"}),
		now: time.Now,
	}
}

// Observe counts one routed read.
func (x *Metrics) Observe(d Decision) {
	family, _, _ := strings.Cut(string(d.Op), ".")
	x.reads.WithLabelValues(family, string(d.Op), strconv.FormatFloat(d.Budget.Seconds(), 'f', -1, 64), d.Outcome()).Inc()
}

// Watch exports m's measurements from now on (the latest Monitor watched wins).
func (x *Metrics) Watch(m *Monitor) { x.mon.Store(m) }

// Describe sends every descriptor.
func (x *Metrics) Describe(ch chan<- *prometheus.Desc) {
	x.reads.Describe(ch)
	ch <- memberLagDesc
	ch <- oplogWindowDesc
	ch <- oplogHeadroomDesc
	ch <- snapshotAgeDesc
}

// Collect sends the counter, and the watched Monitor's latest snapshot and oplog windows.
func (x *Metrics) Collect(ch chan<- prometheus.Metric) {
	x.reads.Collect(ch)
	m := x.mon.Load()
	if m == nil {
		return
	}
	snap, windows := m.Snapshot(), m.OplogWindows()
	if !snap.MeasuredAt.IsZero() {
		ch <- prometheus.MustNewConstMetric(snapshotAgeDesc, prometheus.GaugeValue, max(x.now().Sub(snap.MeasuredAt), 0).Seconds())
	}
	SendReplication(ch, snap.Members, windows)
}

// SendReplication sends the lag of each member, each set's oplog window (windows by replica
// set name) and each member's headroom (window − lag). Arbiters and members without an applied
// time have no lag; a set whose window is unknown has neither window nor headroom.
func SendReplication(ch chan<- prometheus.Metric, members []MemberLag, windows map[string]OplogWindow) {
	behind := map[string]map[string]time.Duration{}
	for _, ml := range members {
		if !ml.Measured || ml.State == StateArbiter {
			continue
		}
		ch <- prometheus.MustNewConstMetric(memberLagDesc, prometheus.GaugeValue, ml.Lag.Seconds(), ml.Shard, ml.Host)
		if behind[ml.Shard] == nil {
			behind[ml.Shard] = map[string]time.Duration{}
		}
		behind[ml.Shard][ml.Host] = ml.Lag
	}
	for set, w := range windows {
		SendOplogWindow(ch, set, w, behind[set])
	}
}

// SendOplogWindow sends set's oplog window and, per member, its headroom: the window less how
// far the member is behind (by member host). The exact headroom is the member's applied time −
// the first entry's, which is the window less how far the member trails the primary's last
// write; the lag serve measures is at most a heartbeat interval more, so its headroom errs low.
func SendOplogWindow(ch chan<- prometheus.Metric, set string, w OplogWindow, behind map[string]time.Duration) {
	ch <- prometheus.MustNewConstMetric(oplogWindowDesc, prometheus.GaugeValue, w.Span().Seconds(), set)
	for member, d := range behind {
		ch <- prometheus.MustNewConstMetric(oplogHeadroomDesc, prometheus.GaugeValue, (w.Span() - d).Seconds(), set, member)
	}
}

// BehindPrimary is how far each member's applied writes trail its primary's, by member host:
// the primary's lastAppliedWallTime − the member's (0 for the primary, never negative). Unlike
// the lag (status date − applied time) it does not grow while the set takes no writes, so a
// reader that writes no heartbeat (the hot-shard monitor) reads an idle set as caught up; but
// it grows only as the primary writes, so it says how far behind, not how stale. Arbiters and
// members without an applied time are left out, and every member when the status has no primary.
func BehindPrimary(st ReplSetStatus) map[string]time.Duration {
	var primary time.Time
	for _, m := range st.Members {
		if m.StateStr == StatePrimary {
			primary = m.LastAppliedWallTime
		}
	}
	if primary.IsZero() {
		return nil
	}
	out := map[string]time.Duration{}
	for _, m := range st.Members {
		if m.StateStr == StateArbiter || m.LastAppliedWallTime.IsZero() {
			continue
		}
		out[m.Name] = max(primary.Sub(m.LastAppliedWallTime), 0)
	}
	return out
}
