package cassandrastore

import (
	"context"
	"strings"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The observer turns each attempt into the host's outcome counter and health; the suspect
// gauge names the host the client avoids. Compared as exposition text on a private registry.
func TestClientMetricsPerHost(t *testing.T) {
	h, _ := newClockHealth()
	reg := prometheus.NewRegistry()
	m := newClientMetrics(reg, h)
	p := &tieredHosts{HostSelectionPolicy: gocql.RoundRobinHostPolicy(), health: h}
	sick, fine := testHost(t, 1), testHost(t, 2)
	p.AddHost(sick)
	p.AddHost(fine)
	w := attemptWatch{health: h, metrics: m}
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		w.ObserveQuery(ctx, gocql.ObservedQuery{Host: sick, Err: gocql.ErrTimeoutNoResponse})
		w.ObserveQuery(ctx, gocql.ObservedQuery{Host: fine})
	}
	w.ObserveBatch(ctx, gocql.ObservedBatch{Host: sick, Err: context.Canceled}) // lost to a speculative execution
	w.ObserveQuery(ctx, gocql.ObservedQuery{Host: fine, Err: &gocql.RequestErrInvalid{}})
	m.speculative.Inc()
	m.retries.Add(2)

	want := `
# HELP shardmart_cassandra_host_requests_total Attempts of Cassandra statements by coordinator host and outcome (ok, timeout, unavailable, connection, cancelled, error); cancelled is mostly an attempt that lost to a speculative execution.
# TYPE shardmart_cassandra_host_requests_total counter
shardmart_cassandra_host_requests_total{host="127.0.9.1",outcome="cancelled"} 1
shardmart_cassandra_host_requests_total{host="127.0.9.1",outcome="timeout"} 3
shardmart_cassandra_host_requests_total{host="127.0.9.2",outcome="error"} 1
shardmart_cassandra_host_requests_total{host="127.0.9.2",outcome="ok"} 3
# HELP shardmart_cassandra_host_suspect 1 while the client tries this Cassandra host only after the others: it stopped answering, or many of its recent requests failed.
# TYPE shardmart_cassandra_host_suspect gauge
shardmart_cassandra_host_suspect{host="127.0.9.1"} 1
shardmart_cassandra_host_suspect{host="127.0.9.2"} 0
# HELP shardmart_cassandra_retries_total Idempotent Cassandra statements sent to the next replica after a coordinator failed them.
# TYPE shardmart_cassandra_retries_total counter
shardmart_cassandra_retries_total 2
# HELP shardmart_cassandra_speculative_executions_total Extra executions of idempotent Cassandra statements started on another replica because the first had not answered in time.
# TYPE shardmart_cassandra_speculative_executions_total counter
shardmart_cassandra_speculative_executions_total 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"shardmart_cassandra_host_requests_total", "shardmart_cassandra_host_suspect",
		"shardmart_cassandra_retries_total", "shardmart_cassandra_speculative_executions_total"); err != nil {
		t.Error(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	// A second store on the same registry shares the counters instead of failing.
	if m2 := newClientMetrics(reg, newHostHealth()); m2.retries != m.retries {
		t.Errorf("a second store's retries counter is not the first's")
	}
}

// The retry policy sends a statement to the next host only for a host's failure, at most
// maxRetries times, and never once the statement's context has ended.
func TestNextHostRetry(t *testing.T) {
	reg := prometheus.NewRegistry()
	p := &policy{metrics: newClientMetrics(reg, nil)}
	r := p.retry(context.Background(), nil).(*nextHostRetry)
	for i := 0; i < maxRetries; i++ {
		if got := r.GetRetryType(gocql.ErrTimeoutNoResponse); got != gocql.RetryNextHost {
			t.Fatalf("retry %d of a timeout: %v, want RetryNextHost", i+1, got)
		}
	}
	if got := r.GetRetryType(&gocql.RequestErrUnavailable{}); got != gocql.Rethrow {
		t.Errorf("retry %d: %v, want Rethrow", maxRetries+1, got)
	}
	if got := p.retry(context.Background(), nil).GetRetryType(&gocql.RequestErrSyntax{}); got != gocql.Rethrow {
		t.Errorf("a syntax error: %v, want Rethrow", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := p.retry(ctx, nil).GetRetryType(gocql.ErrConnectionClosed); got != gocql.Rethrow {
		t.Errorf("after the context ended: %v, want Rethrow", got)
	}
	if got := testutil.ToFloat64(p.metrics.retries); got != maxRetries {
		t.Errorf("retries counted %v, want %d", got, maxRetries)
	}
}
