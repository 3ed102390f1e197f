package cassandrastore

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/serverproc"
	"github.com/shardmart/shardmart/internal/session"
)

// The client policy on a two-node cluster of its own (launcher.PolicyTestAddr, RF 2): what the
// one-node contract cluster cannot show, because speculation needs a second replica.
func TestClientPolicyTwoNodes(t *testing.T) {
	c := launcher.ForTest(t, launcher.Options{Nodes: 2, BaseAddr: launcher.PolicyTestAddr, HeapMB: 512})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ks := "policy_" + fmt.Sprint(time.Now().UnixNano()%1e6)
	if _, err := ApplySchema(ctx, c.Hosts(), SchemaOptions{Keyspace: ks, RF: 2}); err != nil {
		t.Fatalf("apply schema: %v", err)
	}
	reg := prometheus.NewRegistry()
	st, err := Open(ctx, Config{Hosts: c.Hosts(), Keyspace: ks, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sessions := st.Sessions()
	now := time.Now()
	s := session.Session{ID: "policy-session", CreatedAt: now, LastActive: now, ExpiresAt: now.Add(time.Hour), Status: session.StatusActive}
	if err := sessions.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	// Sessions are written at ONE: wait until both replicas hold it, or a speculative read
	// sent to the other one finds nothing (a replication race, not what this test looks at).
	waitFor(t, 30*time.Second, func() bool {
		var n int
		err := st.Session().Query(`SELECT COUNT(*) FROM sessions WHERE session_id = ?`, s.ID).
			Consistency(gocql.All).WithContext(ctx).Scan(&n)
		return err == nil && n == 1
	}, func() string { return "the session on both replicas" })

	// Every attempt the driver makes is counted once per host: the first execution of each
	// statement, plus each speculative execution, plus each retry.
	t.Run("speculative executions counted", func(t *testing.T) {
		st.p.specDelay = time.Microsecond // every read speculates
		defer func() { st.p.specDelay = 0 }()
		before := gather(t, reg)
		const reads = 40
		for i := 0; i < reads; i++ {
			if _, err := sessions.GetSession(ctx, s.ID, time.Now()); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
		}
		var spec, attempts float64
		waitFor(t, 10*time.Second, func() bool { // the losers report after the winner returned
			after := gather(t, reg)
			spec = after.sum("shardmart_cassandra_speculative_executions_total") - before.sum("shardmart_cassandra_speculative_executions_total")
			retries := after.sum("shardmart_cassandra_retries_total") - before.sum("shardmart_cassandra_retries_total")
			attempts = after.sum("shardmart_cassandra_host_requests_total") - before.sum("shardmart_cassandra_host_requests_total")
			return attempts == reads+spec+retries
		}, func() string {
			return fmt.Sprintf("attempts %v, want %d reads + %v speculative + retries", attempts, reads, spec)
		})
		if spec < 1 || spec > reads {
			t.Errorf("%v speculative executions for %d reads speculating after 1µs: want 1..%d", spec, reads, reads)
		}
	})

	// A frozen node (SIGSTOP: a long GC pause) keeps its sockets open, so the driver does not
	// see it down; reads keep answering through the other replica, and the client names it.
	t.Run("frozen node avoided and named", func(t *testing.T) {
		frozen := c.Nodes()[1]
		pid, ok := serverproc.ReadPID(filepath.Join(frozen.Dir, "cassandra.pid"), "-Dcassandra.config=file://"+filepath.Join(frozen.ConfDir(), "cassandra.yaml")+"\x00")
		if !ok {
			t.Fatalf("no live pid for node %s", frozen.Addr)
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		}
		t.Cleanup(resume)
		// kill returns before the JVM's threads have stopped (each stops when next scheduled, a
		// while on a loaded machine): wait until all have, so no read is answered by it below.
		eventually.NoError(t, time.Minute, func() error { return serverproc.Stopped(pid) })
		// Each read has 1 s (the hard cap the shop would see as a stall); speculation after
		// speculateAfter should answer in well under that.
		var lat []time.Duration
		deadline := time.Now().Add(4 * time.Second)
		for time.Now().Before(deadline) {
			rctx, rcancel := context.WithTimeout(ctx, time.Second)
			start := time.Now()
			_, err := sessions.GetSession(rctx, s.ID, time.Now())
			rcancel()
			if err != nil {
				t.Fatalf("read %d while %s is frozen: %v", len(lat), frozen.Addr, err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		t.Logf("%d reads while %s frozen: p50 %s, p99 %s, max %s", len(lat), frozen.Addr,
			lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
		if v := gather(t, reg).get("shardmart_cassandra_host_suspect", frozen.Addr); v != 1 {
			stopped := "yes"
			if err := serverproc.Stopped(pid); err != nil {
				stopped = err.Error()
			}
			t.Errorf("shardmart_cassandra_host_suspect{host=%q} = %v while frozen, want 1 (all its threads stopped: %s)", frozen.Addr, v, stopped)
		}
		resume()
		waitFor(t, 30*time.Second, func() bool {
			_, _ = sessions.GetSession(ctx, s.ID, time.Now())
			return gather(t, reg).get("shardmart_cassandra_host_suspect", frozen.Addr) == 0
		}, func() string { return frozen.Addr + " still suspect after it resumed" })
	})
}

// metrics is a gathered registry.
type metrics []*dto.MetricFamily

func gather(t *testing.T, reg *prometheus.Registry) metrics {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func value(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// sum adds every series of the family name.
func (ms metrics) sum(name string) float64 {
	var v float64
	for _, mf := range ms {
		if mf.GetName() == name {
			for _, m := range mf.Metric {
				v += value(m)
			}
		}
	}
	return v
}

// get is the value of name{host=host}, -1 when there is none.
func (ms metrics) get(name, host string) float64 {
	for _, mf := range ms {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "host" && l.GetValue() == host {
					return value(m)
				}
			}
		}
	}
	return -1
}

// waitFor polls cond until it holds or within passes, then fails with what().
func waitFor(t *testing.T, within time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
