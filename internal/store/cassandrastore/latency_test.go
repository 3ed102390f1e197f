package cassandrastore

import (
	"context"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// The speculative delay follows the recent p99 of its own kind, within its bounds, and starts
// at the default.
func TestRecentP99Delay(t *testing.T) {
	r := newRecentP99()
	read, write := kindOf("SELECT x FROM user_carts WHERE k = ?", gocql.Serial), kindOf("INSERT INTO sessions (k) VALUES (?)", gocql.One)
	if want := (stmtKind{"select.user_carts", gocql.Serial}); read != want {
		t.Fatalf("kind %+v, want %+v", read, want)
	}
	if want := (stmtKind{"insert.sessions", gocql.One}); write != want {
		t.Fatalf("kind %+v, want %+v", write, want)
	}
	if got := r.delay(read); got != specDefault {
		t.Fatalf("delay before samples = %s, want %s", got, specDefault)
	}
	// 1 % of the reads take 300 ms and the rest 20 ms: the p99 is 300 ms. Writes take 1 ms.
	for i := 0; i < 2*p99Samples; i++ {
		d := 20 * time.Millisecond
		if i%100 == 0 || i%100 == 1 {
			d = 300 * time.Millisecond
		}
		r.observe(read, d)
		r.observe(write, time.Millisecond)
	}
	if got := r.delay(read); got != 300*time.Millisecond {
		t.Errorf("read delay %s, want the p99 300ms", got)
	}
	if got := r.delay(write); got != specMin {
		t.Errorf("write delay %s, want the floor %s", got, specMin)
	}
	for i := 0; i < p99Samples; i++ {
		r.observe(read, 3*time.Second)
	}
	if got := r.delay(read); got != specMax {
		t.Errorf("read delay after slow reads %s, want the cap %s", got, specMax)
	}
}

// An LWT attempt is cancelled once the host it was written to stalls, and not before.
func TestAbandonIfStalled(t *testing.T) {
	h := newHostHealth()
	host := testHost(t, 7)
	p := &tieredHosts{HostSelectionPolicy: gocql.RoundRobinHostPolicy(), health: h}
	p.AddHost(host)
	p.AddHost(testHost(t, 8)) // another host up: abandoning has somewhere to go
	sent := &sentTo{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go h.abandonIfStalled(sent, cancel, done)
	sent.host.Store(host)
	start := time.Now()
	h.sent(host)
	<-ctx.Done()
	if waited := time.Since(start); waited < casStallAfter {
		t.Fatalf("cancelled after %s, before casStallAfter %s", waited, casStallAfter)
	}
	close(done)

	// stalled itself, on a clock: not at its threshold, just after it, and not once answered.
	hc, c := newClockHealth()
	hc.sent(host)
	c.add(casStallAfter)
	if hc.stalled(host, casStallAfter) {
		t.Errorf("stalled at exactly casStallAfter")
	}
	c.add(time.Millisecond)
	if !hc.stalled(host, casStallAfter) {
		t.Errorf("not stalled after casStallAfter")
	}
	hc.answered(host)
	if hc.stalled(host, casStallAfter) {
		t.Errorf("stalled after an answer")
	}
}

// An LWT attempt on a stalled host is abandoned only for a host that is up and not suspect:
// when every host stalls, the next attempt would wait on one no better.
func TestHealthyBesides(t *testing.T) {
	h, c := newClockHealth()
	a, b := testHost(t, 1), testHost(t, 2)
	p := &tieredHosts{HostSelectionPolicy: gocql.RoundRobinHostPolicy(), health: h}
	p.AddHost(a)
	if h.healthyBesides(a) {
		t.Errorf("a healthy other host with none known")
	}
	p.AddHost(b)
	h.sent(a)
	h.sent(b)
	c.add(stallAfter + time.Millisecond)
	if h.healthyBesides(a) {
		t.Errorf("a healthy other host while both stall")
	}
	h.answered(b)
	if !h.healthyBesides(a) {
		t.Errorf("no healthy other host once b answered")
	}
}
