package cassandrastore

import (
	"context"
	"errors"
	"slices"

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
	if q.Query != nil {
		w.logAttempt(ctx, q.Statement, q.Query.GetConsistency(), tracing.IsConditional(q.Statement), q.Host, q.Start, q.End, q.Attempt, q.Err)
	}
	if q.Err == nil && w.latency != nil && q.Query != nil {
		w.latency.observe(kindOf(q.Statement, q.Query.GetConsistency()), q.End.Sub(q.Start))
	}
	if w.stmt != nil {
		w.stmt.ObserveQuery(ctx, q)
	}
	if w.tracer != nil {
		attrs := []attribute.KeyValue{tracing.KeyRows.Int(q.Rows), tracing.KeyAttempt.Int(q.Attempt),
			tracing.KeyLWT.Bool(tracing.IsConditional(q.Statement))}
		if q.Query != nil {
			attrs = append(attrs, tracing.KeyConsistency.String(q.Query.GetConsistency().String()))
		}
		tracing.Statement(ctx, w.tracer, "cassandra", statementName(q.Statement), q.Start, q.End, q.Err, attrs...)
	}
}

func (w attemptWatch) ObserveBatch(ctx context.Context, b gocql.ObservedBatch) {
	w.record(ctx, b.Host, b.Err)
	if b.Batch != nil {
		w.logAttempt(ctx, "batch", b.Batch.GetConsistency(), slices.ContainsFunc(b.Statements, tracing.IsConditional), b.Host, b.Start, b.End, b.Attempt, b.Err)
	}
	if b.Err == nil && w.latency != nil && b.Batch != nil {
		w.latency.observe(kindOf("batch", b.Batch.GetConsistency()), b.End.Sub(b.Start))
	}
	if w.stmt != nil {
		w.stmt.ObserveBatch(ctx, b)
	}
	if w.tracer != nil {
		lwt := slices.ContainsFunc(b.Statements, tracing.IsConditional)
		attrs := []attribute.KeyValue{tracing.KeyAttempt.Int(b.Attempt), tracing.KeyLWT.Bool(lwt)}
		if b.Batch != nil {
			attrs = append(attrs, tracing.KeyConsistency.String(b.Batch.GetConsistency().String()))
		}
		tracing.Statement(ctx, w.tracer, "cassandra", "batch", b.Start, b.End, b.Err, attrs...)
	}
}
