package cassandrastore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// clock is a settable time source for hostHealth.
type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClockHealth() (*hostHealth, *clock) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := newHostHealth()
	h.now = c.now
	return h, c
}

func testHost(t *testing.T, last byte) *gocql.HostInfo {
	t.Helper()
	h, err := gocql.NewHostInfoFromAddrPort(net.IPv4(127, 0, 9, last), 9042)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// A host that has been sent requests and answered none for stallAfter is suspect until it
// answers again; one that answers is not, however long its last request took.
func TestHostHealthStall(t *testing.T) {
	h, c := newClockHealth()
	frozen, busy := testHost(t, 1), testHost(t, 2)
	h.sent(frozen)
	h.sent(busy)
	c.add(stallAfter / 2)
	h.answered(busy)
	h.sent(busy)
	if h.suspect(frozen) || h.suspect(busy) {
		t.Fatalf("suspect before stallAfter: frozen %v, busy %v", h.suspect(frozen), h.suspect(busy))
	}
	c.add(stallAfter/2 + time.Millisecond)
	if !h.suspect(frozen) {
		t.Errorf("a host silent for %s with a request waiting is not suspect", stallAfter+time.Millisecond)
	}
	if h.suspect(busy) {
		t.Errorf("a host that answered %s ago is suspect", stallAfter/2)
	}
	h.answered(frozen)
	if h.suspect(frozen) {
		t.Errorf("a host that answered is still suspect")
	}
}

// A host is failing when enough of its recent attempts failed; the record decays, so a host
// no longer chosen is tried again after a few half-lives; a lone failure among many successes
// is not enough.
func TestHostHealthFailures(t *testing.T) {
	h, c := newClockHealth()
	sick, fine := testHost(t, 1), testHost(t, 2)
	for i := 0; i < 3; i++ {
		h.attempt(sick, true)
	}
	for i := 0; i < 50; i++ {
		h.attempt(fine, i == 10)
	}
	if !h.suspect(sick) {
		t.Errorf("3 failures in a row: not suspect")
	}
	if h.suspect(fine) {
		t.Errorf("1 failure in 50: suspect")
	}
	c.add(3 * failHalfLife)
	if h.suspect(sick) {
		t.Errorf("still suspect %s after its last failure", 3*failHalfLife)
	}
}

// outcomeOf names the outcome and says whether it is the host's fault.
func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err        error
		callerDone bool
		outcome    string
		bad        bool
	}{
		{nil, false, "ok", false},
		{gocql.ErrNotFound, false, "ok", false},
		{context.Canceled, false, "cancelled", true},
		{context.Canceled, true, "cancelled", false},
		{gocql.ErrTimeoutNoResponse, false, "timeout", true},
		{fmt.Errorf("read: %w", &gocql.RequestErrWriteTimeout{WriteType: "CAS"}), false, "timeout", true},
		{&gocql.RequestErrUnavailable{}, false, "unavailable", true},
		{gocql.ErrConnectionClosed, false, "connection", true},
		{&net.OpError{Op: "dial", Err: errors.New("refused")}, false, "connection", true},
		{&gocql.RequestErrInvalid{}, false, "error", false},
		{errors.New("marshal: bad value"), false, "error", false},
	} {
		outcome, bad := outcomeOf(tc.err, tc.callerDone)
		if outcome != tc.outcome || bad != tc.bad {
			t.Errorf("outcomeOf(%v, callerDone %v) = %q, %v; want %q, %v", tc.err, tc.callerDone, outcome, bad, tc.outcome, tc.bad)
		}
	}
}

// tieredHosts puts suspect hosts last, in Pick and in HostTier, and never drops one.
func TestTieredHostsSuspectLast(t *testing.T) {
	h, _ := newClockHealth()
	p := &tieredHosts{HostSelectionPolicy: gocql.RoundRobinHostPolicy(), health: h}
	hosts := []*gocql.HostInfo{testHost(t, 1), testHost(t, 2), testHost(t, 3)}
	for _, host := range hosts {
		p.AddHost(host)
	}
	if got := h.upHosts(); got != 3 {
		t.Fatalf("upHosts = %d, want 3", got)
	}
	sick := hosts[1]
	for i := 0; i < 3; i++ {
		h.attempt(sick, true)
	}
	if p.HostTier(sick) != 1 || p.HostTier(hosts[0]) != 0 || p.MaxHostTier() != 1 {
		t.Fatalf("tiers: sick %d, healthy %d, max %d; want 1, 0, 1", p.HostTier(sick), p.HostTier(hosts[0]), p.MaxHostTier())
	}
	for i := 0; i < 6; i++ { // every round-robin start position
		next := p.Pick(nil)
		var order []string
		for sh := next(); sh != nil; sh = next() {
			order = append(order, hostKey(sh.Info()))
		}
		if len(order) != 3 || order[2] != hostKey(sick) {
			t.Fatalf("pick order %v: want 3 hosts, %s last", order, hostKey(sick))
		}
	}
}

// A host that becomes suspect after a statement's hosts were ordered is still tried last: a
// speculative execution or a retry asks for the next host later than the order was made.
func TestDeferSuspectLooksAgainAtEachHost(t *testing.T) {
	h, c := newClockHealth()
	first, froze, third := testHost(t, 1), testHost(t, 2), testHost(t, 3)
	plan := []*gocql.HostInfo{first, froze, third}
	next := h.deferSuspect(func() gocql.SelectedHost {
		if len(plan) == 0 {
			return nil
		}
		hi := plan[0]
		plan = plan[1:]
		return selected{hi}
	})
	if got := next().Info(); got != first {
		t.Fatalf("first host %v, want %v", got.ConnectAddress(), first.ConnectAddress())
	}
	// The second host freezes after the order was made: sent a request, silent past stallAfter.
	h.sent(froze)
	c.add(stallAfter + time.Millisecond)
	var got []string
	for sh := next(); sh != nil; sh = next() {
		got = append(got, sh.Info().ConnectAddress().String())
	}
	want := []string{third.ConnectAddress().String(), froze.ConnectAddress().String()}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("hosts after the first %v, want %v (the host that froze last)", got, want)
	}
}
