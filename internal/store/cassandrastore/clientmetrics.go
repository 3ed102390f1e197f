package cassandrastore

import (
	"context"
	"errors"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/tracing"
)

// clientMetrics is what the driver does per host: every attempt of a statement by coordinator
// and outcome, the speculative executions and retries the policy started, the lightweight
// transactions whose outcome was unknown, and which hosts the client currently avoids. An
// operator sees which node is sick without reading logs.
type clientMetrics struct {
	hostRequests *prometheus.CounterVec
	speculative  prometheus.Counter
	retries      prometheus.Counter
	casUnknown   prometheus.Counter
}

// newClientMetrics registers the metrics on reg; metrics another store registered on reg first
// are shared (their names are the same), except the suspect gauge, which stays the first's.
func newClientMetrics(reg prometheus.Registerer, health *hostHealth) *clientMetrics {
	m := &clientMetrics{
		hostRequests: reuse(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardmart_cassandra_host_requests_total",
			Help: "Attempts of Cassandra statements by coordinator host and outcome (ok, timeout, unavailable, connection, cancelled, error); cancelled is mostly an attempt that lost to a speculative execution.",
		}, []string{"host", "outcome"})),
		speculative: reuse(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shardmart_cassandra_speculative_executions_total",
			Help: "Extra executions of idempotent Cassandra statements started on another replica because the first had not answered in time.",
		})),
		retries: reuse(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shardmart_cassandra_retries_total",
			Help: "Idempotent Cassandra statements sent to the next replica after a coordinator failed them.",
		})),
		casUnknown: reuse(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "shardmart_cassandra_cas_unknown_total",
			Help: "Lightweight transaction attempts whose outcome was unknown (timeout); each is settled by a read at SERIAL.",
		})),
	}
	if health != nil {
		_ = reg.Register(suspectCollector{health})
	}
	return m
}

func reuse[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err) // a name clash with a different metric: a programming error
	}
	return c
}

var suspectDesc = prometheus.NewDesc("shardmart_cassandra_host_suspect",
	"1 while the client tries this Cassandra host only after the others: it stopped answering, or many of its recent requests failed.",
	[]string{"host"}, nil)

// suspectCollector reports hostHealth's verdict per known host at scrape time.
type suspectCollector struct{ h *hostHealth }

func (c suspectCollector) Describe(ch chan<- *prometheus.Desc) { ch <- suspectDesc }

func (c suspectCollector) Collect(ch chan<- prometheus.Metric) {
	c.h.each(func(addr string, suspect bool) {
		v := 0.0
		if suspect {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(suspectDesc, prometheus.GaugeValue, v, addr)
	})
}

// attemptWatch is the driver's query and batch observer: each attempt feeds the host's health,
// the per-host metric and the statement observer (if any).
type attemptWatch struct {
	health  *hostHealth
	latency *recentP99
	metrics *clientMetrics
	stmt    observer     // nil: no statement metric
	tracer  trace.Tracer // nil: no statement spans
}

func (w attemptWatch) record(ctx context.Context, host *gocql.HostInfo, err error) {
	outcome, bad := outcomeOf(err, ctx.Err() != nil)
	if w.health != nil && host != nil {
		w.health.attempt(host, bad)
	}
	if w.metrics != nil && host != nil {
		w.metrics.hostRequests.WithLabelValues(hostKey(host), outcome).Inc()
	}
}

func (w attemptWatch) ObserveQuery(ctx context.Context, q gocql.ObservedQuery) {
	w.record(ctx, q.Host, q.Err)
	in := infoOf(q.Statement)
	cl, known := gocql.Consistency(0), q.Query != nil
	if known {
		cl = q.Query.GetConsistency()
	}
	w.attempt(ctx, in.name, in.lwt, cl, known, q.Host, q.Start, q.End, q.Attempt, q.Err, tracing.KeyRows.Int(q.Rows))
}

func (w attemptWatch) ObserveBatch(ctx context.Context, b gocql.ObservedBatch) {
	w.record(ctx, b.Host, b.Err)
	cl, known := gocql.Consistency(0), b.Batch != nil
	if known {
		cl = b.Batch.GetConsistency()
	}
	w.attempt(ctx, "batch", anyLWT(b.Statements), cl, known, b.Host, b.Start, b.End, b.Attempt, b.Err)
}

// attempt feeds one attempt of the statement named name, at consistency cl (known: the driver
// gave its statement), to the attempt log, the speculative delay, the statement metric and the
// trace.
func (w attemptWatch) attempt(ctx context.Context, name string, lwt bool, cl gocql.Consistency, known bool, host *gocql.HostInfo,
	start, end time.Time, n int, err error, attrs ...attribute.KeyValue) {
	if known {
		w.logAttempt(ctx, name, cl, lwt, host, start, end, n, err)
		if err == nil && w.latency != nil {
			w.latency.observe(stmtKind{name, cl}, end.Sub(start))
		}
	}
	if w.stmt != nil {
		w.stmt(name, end.Sub(start), err)
	}
	if w.tracer != nil {
		attrs = append(attrs, tracing.KeyAttempt.Int(n), tracing.KeyLWT.Bool(lwt))
		if known {
			attrs = append(attrs, tracing.KeyConsistency.String(cl.String()))
		}
		tracing.Statement(ctx, w.tracer, "cassandra", name, start, end, err, attrs...)
	}
}
