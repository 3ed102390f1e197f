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

// SendReplication sends each set's oplog window (windows by replica set name), the lag of each
// member, and its headroom (window − lag). Arbiters and members without an applied time have
// no lag; a set whose window is unknown has neither window nor headroom. The hot-shard monitor
// sends the same series from its own reading of each shard.
func SendReplication(ch chan<- prometheus.Metric, members []MemberLag, windows map[string]OplogWindow) {
	for set, w := range windows {
		ch <- prometheus.MustNewConstMetric(oplogWindowDesc, prometheus.GaugeValue, w.Span().Seconds(), set)
	}
	for _, ml := range members {
		if !ml.Measured || ml.State == StateArbiter {
			continue
		}
		ch <- prometheus.MustNewConstMetric(memberLagDesc, prometheus.GaugeValue, ml.Lag.Seconds(), ml.Shard, ml.Host)
		if w, ok := windows[ml.Shard]; ok {
			ch <- prometheus.MustNewConstMetric(oplogHeadroomDesc, prometheus.GaugeValue, (w.Span() - ml.Lag).Seconds(), ml.Shard, ml.Host)
		}
	}
}
