package repair

import (
	"context"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/robfig/cron/v3"
)

func TestParseTargets(t *testing.T) {
	got, err := ParseTargets("# node = jmx\n10.0.0.1:7199\n10.0.0.2:7199, 127.0.0.191=127.0.0.1:7391 # tunnel\n\n")
	want := []Target{{"10.0.0.1", "10.0.0.1", 7199}, {"10.0.0.2", "10.0.0.2", 7199}, {"127.0.0.191", "127.0.0.1", 7391}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ParseTargets = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "# only a comment", "10.0.0.1", "10.0.0.1:jmx", "10.0.0.1:70000", "a:1,a:2"} {
		if _, err := ParseTargets(bad); err == nil {
			t.Errorf("ParseTargets(%q) = nil error, want one", bad)
		}
	}
}

func tok(s string) *big.Int { v, _ := new(big.Int).SetString(s, 10); return v }

// Three nodes, one token each at the launcher's positions, RF 3 (every node holds every
// range) and RF 2 (each range on its owner and the next node clockwise).
func TestRangesSimpleStrategy(t *testing.T) {
	ring := Ring{Endpoints: []Endpoint{
		{Addr: "b", DC: "dc1", Rack: "r1", Tokens: []*big.Int{tok("-3074457345618258603")}},
		{Addr: "a", DC: "dc1", Rack: "r1", Tokens: []*big.Int{tok("-9223372036854775808")}},
		{Addr: "c", DC: "dc1", Rack: "r1", Tokens: []*big.Int{tok("3074457345618258602")}},
	}, Replication: map[string]string{"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": "2"}}
	rs, err := ring.Ranges()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, r.Start.String()+".."+r.End.String()+":"+strings.Join(r.Replicas, ""))
	}
	want := []string{
		"3074457345618258602..-9223372036854775808:ab", // wraps; owned by a, then b
		"-9223372036854775808..-3074457345618258603:bc",
		"-3074457345618258603..3074457345618258602:ac",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ranges\n got %v\nwant %v", got, want)
	}
}

// NetworkTopologyStrategy takes distinct racks first: with {dc1: 2} and the two nodes after a
// token on the same rack, the second replica is the next node on another rack.
func TestRangesNetworkTopologyRacks(t *testing.T) {
	ring := Ring{Endpoints: []Endpoint{
		{Addr: "n1", DC: "dc1", Rack: "r1", Tokens: []*big.Int{big.NewInt(0)}},
		{Addr: "n2", DC: "dc1", Rack: "r1", Tokens: []*big.Int{big.NewInt(100)}},
		{Addr: "n3", DC: "dc1", Rack: "r2", Tokens: []*big.Int{big.NewInt(200)}},
		{Addr: "x1", DC: "dc2", Rack: "r1", Tokens: []*big.Int{big.NewInt(50)}},
	}, Replication: map[string]string{"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "2", "dc2": "1"}}
	rs, err := ring.Ranges()
	if err != nil {
		t.Fatal(err)
	}
	// Range (-inf.. 0] ends at n1's token: dc1 walk n1 (r1), n2 (r1, skipped), n3 (r2); dc2 x1.
	if got := rs[0].Replicas; !slices.Equal(got, []string{"n1", "n3", "x1"}) {
		t.Fatalf("replicas of (200, 0] = %v, want [n1 n3 x1]", got)
	}
}

func TestSplit(t *testing.T) {
	min := tok("-9223372036854775808")
	rs := []Range{
		{Start: tok("3074457345618258602"), End: min, Replicas: []string{"a", "b"}},
		{Start: min, End: tok("-3074457345618258603"), Replicas: []string{"b", "c"}},
		{Start: tok("-3074457345618258603"), End: tok("3074457345618258602"), Replicas: []string{"a", "c"}},
	}
	segs := Split(rs, 6)
	if len(segs) != 6 {
		t.Fatalf("%d segments, want 6: %v", len(segs), segs)
	}
	// Contiguous, in order, each inside its range, covering the whole ring.
	for i, s := range segs {
		if s.ID != i {
			t.Errorf("segment %d has id %d", i, s.ID)
		}
		next := segs[(i+1)%len(segs)]
		if s.End != next.Start {
			t.Errorf("segment %d ends at %s, segment %d starts at %s", i, s.End, next.ID, next.Start)
		}
	}
	if segs[0].Start != "3074457345618258602" || segs[1].End != min.String() || !slices.Equal(segs[1].Replicas, []string{"a", "b"}) {
		t.Errorf("the wrapping range's segments: %v %v", segs[0], segs[1])
	}
	// Fewer segments than ranges: one per range.
	if got := Split(rs, 1); len(got) != 3 {
		t.Errorf("Split(ranges, 1) = %d segments, want 3", len(got))
	}
}

// fakeClock's After fires when the test advances time past its deadline.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	waiting chan struct{} // a send per After call
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	ch := make(chan time.Time, 1)
	c.waiters = append(c.waiters, waiter{c.now.Add(d), ch})
	c.mu.Unlock()
	c.waiting <- struct{}{}
	return ch
}

func (c *fakeClock) advanceTo(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if !w.at.After(t) {
			w.ch <- t
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

// The loop runs at each scheduled time (every 15 minutes), never in between, and returns once
// its context is cancelled while it waits.
func TestLoopRunsAtScheduledTimes(t *testing.T) {
	sched, err := cron.ParseStandard("*/15 * * * *")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 28, 3, 7, 0, 0, time.UTC)
	clock := &fakeClock{now: start, waiting: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop(ctx, sched, clock, func(_ context.Context, at time.Time) { ran <- at })
	}()
	<-clock.waiting
	clock.advanceTo(start.Add(7 * time.Minute)) // 03:14: not yet
	select {
	case at := <-ran:
		t.Fatalf("ran at %s, before the schedule's 03:15", at)
	case <-time.After(50 * time.Millisecond):
	}
	var got []time.Time
	for _, to := range []string{"03:15", "03:30", "03:45"} {
		at, _ := time.Parse("15:04", to)
		clock.advanceTo(time.Date(2026, 11, 28, at.Hour(), at.Minute(), 0, 0, time.UTC))
		got = append(got, <-ran)
		<-clock.waiting
	}
	want := []time.Time{
		time.Date(2026, 11, 28, 3, 15, 0, 0, time.UTC),
		time.Date(2026, 11, 28, 3, 30, 0, 0, time.UTC),
		time.Date(2026, 11, 28, 3, 45, 0, 0, time.UTC),
	}
	if !slices.Equal(got, want) {
		t.Fatalf("runs at %v, want %v", got, want)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Loop did not return after its context was cancelled")
	}
}

// The same loop on the real clock with an every-second schedule: two runs, then it stops.
func TestLoopRealClockStopsOnCancel(t *testing.T) {
	sched, _ := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow).Parse("* * * * * *")
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var runs []time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		Loop(ctx, sched, RealClock{}, func(_ context.Context, at time.Time) {
			mu.Lock()
			runs = append(runs, at)
			n := len(runs)
			mu.Unlock()
			if n == 2 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Loop did not stop")
	}
	if len(runs) != 2 || runs[1].Sub(runs[0]) != time.Second || runs[0].Nanosecond() != 0 {
		t.Fatalf("runs %v: want two, one second apart, on whole seconds", runs)
	}
}

func TestMetrics(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg, func() time.Time { return now })
	m.tables("shop", map[string]int{"orders": 864000, "carts": 3600}, map[string]time.Time{"orders": now.Add(-90 * time.Second)})
	m.segment("shop", true)
	m.segment("shop", false)
	m.setProgress("shop", 1, 4)
	want := `
# HELP shardmart_cassandra_repair_seconds_since_complete Seconds since the table's last complete repair run; +Inf when it was never repaired.
# TYPE shardmart_cassandra_repair_seconds_since_complete gauge
shardmart_cassandra_repair_seconds_since_complete{keyspace="shop",table="carts"} +Inf
shardmart_cassandra_repair_seconds_since_complete{keyspace="shop",table="orders"} 90
# HELP shardmart_cassandra_repair_run_progress_ratio Share of the current (or last) repair run's segments done, 0 to 1.
# TYPE shardmart_cassandra_repair_run_progress_ratio gauge
shardmart_cassandra_repair_run_progress_ratio{keyspace="shop"} 0.25
# HELP shardmart_cassandra_table_gc_grace_seconds The table's gc_grace_seconds: a replica that missed a delete must be repaired within it.
# TYPE shardmart_cassandra_table_gc_grace_seconds gauge
shardmart_cassandra_table_gc_grace_seconds{keyspace="shop",table="carts"} 3600
shardmart_cassandra_table_gc_grace_seconds{keyspace="shop",table="orders"} 864000
# HELP shardmart_cassandra_repair_segments_done_total Repair segments that completed.
# TYPE shardmart_cassandra_repair_segments_done_total counter
shardmart_cassandra_repair_segments_done_total{keyspace="shop"} 1
# HELP shardmart_cassandra_repair_segments_failed_total Repair segment attempts that failed or timed out (each is retried until its attempts run out).
# TYPE shardmart_cassandra_repair_segments_failed_total counter
shardmart_cassandra_repair_segments_failed_total{keyspace="shop"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	m.completed("shop", []string{"carts"}, now.Add(-time.Second))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP shardmart_cassandra_repair_seconds_since_complete Seconds since the table's last complete repair run; +Inf when it was never repaired.
# TYPE shardmart_cassandra_repair_seconds_since_complete gauge
shardmart_cassandra_repair_seconds_since_complete{keyspace="shop",table="carts"} 1
shardmart_cassandra_repair_seconds_since_complete{keyspace="shop",table="orders"} 90
`), "shardmart_cassandra_repair_seconds_since_complete"); err != nil {
		t.Fatal(err)
	}
}

// The JMX password and the SSL properties reach nodetool through 0600 files in its home, never
// its command line.
func TestNodetoolGlobalOptions(t *testing.T) {
	home := t.TempDir()
	props := filepath.Join(t.TempDir(), "ssl.properties")
	if err := os.WriteFile(props, []byte("javax.net.ssl.trustStore=/etc/ts.jks\njavax.net.ssl.trustStorePassword=tspw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &JVMNodetool{home: home}
	args, err := n.globalOptions(JVMOptions{Credentials: Credentials{User: "repair", Password: "pw secret"}, SSLProperties: props})
	pwf := filepath.Join(home, "jmx.password")
	if want := []string{"-u", "repair", "-pwf", pwf, "--ssl"}; err != nil || !slices.Equal(args, want) {
		t.Fatalf("options %v, %v; want %v", args, err, want)
	}
	for file, want := range map[string]string{pwf: "repair pw secret\n",
		filepath.Join(home, ".cassandra", "nodetool-ssl.properties"): "javax.net.ssl.trustStore=/etc/ts.jks\njavax.net.ssl.trustStorePassword=tspw\n"} {
		b, err := os.ReadFile(file)
		st, _ := os.Stat(file)
		if err != nil || string(b) != want || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %q (%v), %v; want %q, mode 0600", file, b, st.Mode().Perm(), err, want)
		}
	}
	for _, a := range args {
		if strings.Contains(a, "secret") || strings.Contains(a, "tspw") {
			t.Errorf("a secret on the command line: %q", a)
		}
	}
	if _, err := n.globalOptions(JVMOptions{Credentials: Credentials{User: "repair"}}); err == nil {
		t.Error("a JMX user without a password was accepted")
	}
}
