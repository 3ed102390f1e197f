package repair

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the repairer's Prometheus metrics. The staleness gauge is computed at scrape
// time from the last complete repair of each table, so it keeps growing between runs.
type Metrics struct {
	segmentsDone   *prometheus.CounterVec
	segmentsFailed *prometheus.CounterVec
	progress       *prometheus.GaugeVec
	gcGrace        *prometheus.GaugeVec
	staleness      *prometheus.Desc
	now            func() time.Time

	mu   sync.Mutex
	last map[[2]string]time.Time // (keyspace, table) -> last complete repair; zero: never
}

// NewMetrics registers the metrics on reg; now is the clock of the staleness gauge.
func NewMetrics(reg prometheus.Registerer, now func() time.Time) *Metrics {
	if now == nil {
		now = time.Now
	}
	m := &Metrics{
		segmentsDone: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardmart_cassandra_repair_segments_done_total",
			Help: "Repair segments that completed.",
		}, []string{"keyspace"}),
		segmentsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardmart_cassandra_repair_segments_failed_total",
			Help: "Repair segment attempts that failed or timed out (each is retried until its attempts run out).",
		}, []string{"keyspace"}),
		progress: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardmart_cassandra_repair_run_progress_ratio",
			Help: "Share of the current (or last) repair run's segments done, 0 to 1.",
		}, []string{"keyspace"}),
		gcGrace: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "shardmart_cassandra_table_gc_grace_seconds",
			Help: "The table's gc_grace_seconds: a replica that missed a delete must be repaired within it.",
		}, []string{"keyspace", "table"}),
		staleness: prometheus.NewDesc("shardmart_cassandra_repair_seconds_since_complete",
			"Seconds since the table's last complete repair run; +Inf when it was never repaired.",
			[]string{"keyspace", "table"}, nil),
		now:  now,
		last: map[[2]string]time.Time{},
	}
	if reg != nil {
		reg.MustRegister(m.segmentsDone, m.segmentsFailed, m.progress, m.gcGrace, m)
	}
	return m
}

// Describe and Collect make the staleness gauge a collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.staleness }

func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for k, t := range m.last {
		v := math.Inf(1)
		if !t.IsZero() {
			v = now.Sub(t).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(m.staleness, prometheus.GaugeValue, v, k[0], k[1])
	}
}

// tables records the tables a keyspace's repairs cover, their gc_grace_seconds and their last
// complete repairs (zero: never).
func (m *Metrics) tables(keyspace string, gcGrace map[string]int, last map[string]time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for tb, g := range gcGrace {
		m.gcGrace.WithLabelValues(keyspace, tb).Set(float64(g))
		m.last[[2]string{keyspace, tb}] = last[tb]
	}
}

func (m *Metrics) completed(keyspace string, tables []string, t time.Time) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, tb := range tables {
		m.last[[2]string{keyspace, tb}] = t
	}
}

func (m *Metrics) segment(keyspace string, ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.segmentsDone.WithLabelValues(keyspace).Inc()
	} else {
		m.segmentsFailed.WithLabelValues(keyspace).Inc()
	}
}

func (m *Metrics) setProgress(keyspace string, done, total int) {
	if m == nil || total == 0 {
		return
	}
	m.progress.WithLabelValues(keyspace).Set(float64(done) / float64(total))
}
