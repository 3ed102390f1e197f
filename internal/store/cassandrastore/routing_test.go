package cassandrastore

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// pickFunc is a host selection policy whose Pick is fn (the other methods are never called).
type pickFunc struct {
	gocql.HostSelectionPolicy
	fn func() gocql.NextHost
}

func (p pickFunc) Pick(gocql.ExecutableStatement) gocql.NextHost { return p.fn() }

func onlyHost(h *gocql.HostInfo) gocql.NextHost {
	return func() gocql.SelectedHost { return selected{h} }
}

type selected struct{ h *gocql.HostInfo }

func (s selected) Info() *gocql.HostInfo { return s.h }
func (s selected) Mark(error)            {}

func TestQuickRoutingTakesTheFallbackWhenRoutingStalls(t *testing.T) {
	replica, other := &gocql.HostInfo{}, &gocql.HostInfo{}
	release := make(chan struct{})
	defer close(release)
	p := &quickRouting{
		HostSelectionPolicy: pickFunc{fn: func() gocql.NextHost { <-release; return onlyHost(replica) }},
		fallback:            pickFunc{fn: func() gocql.NextHost { return onlyHost(other) }},
	}
	start := time.Now()
	if got := p.Pick(nil)().Info(); got != other {
		t.Fatalf("a stalled routing lookup picked %p, want the fallback's %p", got, other)
	}
	if took := time.Since(start); took < routingWait {
		t.Errorf("gave up on routing after %s, before routingWait %s", took, routingWait)
	}
}

func TestQuickRoutingKeepsTheTokenAwareChoice(t *testing.T) {
	replica, other := &gocql.HostInfo{}, &gocql.HostInfo{}
	p := &quickRouting{
		HostSelectionPolicy: pickFunc{fn: func() gocql.NextHost { return onlyHost(replica) }},
		fallback:            pickFunc{fn: func() gocql.NextHost { return onlyHost(other) }},
	}
	for range 100 {
		if got := p.Pick(nil)().Info(); got != replica {
			t.Fatalf("picked %p, want the token-aware replica %p", got, replica)
		}
	}
}

// stubStatement is a statement for Pick: its routing lookup answers err.
type stubStatement struct {
	q   *gocql.Query
	err error
}

func (s stubStatement) GetRoutingKey() ([]byte, error) { return []byte("k"), s.err }
func (s stubStatement) Keyspace() string               { return "shardmart" }
func (s stubStatement) Table() string                  { return "" }
func (s stubStatement) IsIdempotent() bool             { return true }
func (s stubStatement) GetHostID() string              { return "" }
func (s stubStatement) Statement() gocql.Statement     { return s.q }

// Once a statement text's routing lookup has succeeded, its coordinator is chosen in place
// (no bound, no goroutine): a slow token-aware choice is waited for. A text whose lookup failed
// keeps the bound.
func TestQuickRoutingChoosesKnownStatementsInPlace(t *testing.T) {
	replica, other := &gocql.HostInfo{}, &gocql.HostInfo{}
	var slow atomic.Bool
	p := &quickRouting{
		HostSelectionPolicy: pickFunc{fn: func() gocql.NextHost {
			if slow.Load() {
				time.Sleep(2 * routingWait)
			}
			return onlyHost(replica)
		}},
		fallback: pickFunc{fn: func() gocql.NextHost { return onlyHost(other) }},
	}
	session := &gocql.Session{}
	known := stubStatement{q: session.Query(`SELECT items FROM user_carts WHERE user_id = ?`)}
	failing := stubStatement{q: session.Query(`SELECT items FROM guest_carts WHERE token = ?`), err: errors.New("prepare failed")}
	for _, st := range []stubStatement{known, failing} {
		if got := p.Pick(st)().Info(); got != replica {
			t.Fatalf("first run of %q picked %p, want the replica %p", st.q.Statement(), got, replica)
		}
	}
	slow.Store(true)
	if got := p.Pick(known)().Info(); got != replica {
		t.Errorf("a statement with known routing picked %p, want the token-aware replica %p after waiting", got, replica)
	}
	if got := p.Pick(failing)().Info(); got != other {
		t.Errorf("a statement whose lookup failed picked %p, want the fallback's %p (bounded)", got, other)
	}
}
