package cassandrastore

import (
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
