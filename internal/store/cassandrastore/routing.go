package cassandrastore

import (
	"sync"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// routingWait bounds how long choosing a statement's coordinator may take. Above a prepare's
// round trip on a loaded machine, so a statement's first run is still routed to a replica; far
// below stallAfter.
const routingWait = 100 * time.Millisecond

// quickRouting is the token-aware policy with a bound on choosing a coordinator. To route a
// statement, the driver needs its partition-key columns, which it learns the first time the
// statement runs by preparing it on the first host of its ring that it thinks up, whichever that
// is, and every caller of the same statement waits for that one prepare. With that host frozen
// or cut off the wait is the driver's full Timeout: measured, every shop client blocked 6 s on a
// session read first run during a freeze. When the token-aware choice is not made within
// routingWait, the statement takes the fallback order (suspect hosts last) and the lookup
// finishes in the background for the statements after it.
//
// Only a statement whose routing is not known yet needs the bound: once the driver has its
// partition-key columns it keeps them (it drops them only on a failed lookup, or past
// MaxRoutingKeyInfo statement texts, far more than the store's), and the token-aware choice is
// then computed in place. So a statement text runs the bounded lookup, a goroutine and a timer,
// until one lookup of it has succeeded, and never again.
type quickRouting struct {
	gocql.HostSelectionPolicy // token aware
	fallback                  gocql.HostSelectionPolicy
	// health defers a host that became suspect after the token-aware order was made.
	health *hostHealth
	// routed holds the statement texts whose routing the driver has learnt.
	routed    sync.Map // string -> struct{}
	routedLen atomic.Int32
}

// maxRouted bounds routed: a caller building statement texts with values in them would
// otherwise grow it without end (those keep the bounded lookup).
const maxRouted = 512

func (p *quickRouting) Pick(q gocql.ExecutableStatement) gocql.NextHost {
	text, ok := routingText(q)
	if ok {
		if _, known := p.routed.Load(text); known {
			return p.health.deferSuspect(p.HostSelectionPolicy.Pick(q))
		}
	}
	picked := make(chan gocql.NextHost, 1)
	go func() {
		if ok && p.routedLen.Load() < maxRouted {
			// The driver's lookup, cached: the Pick below finds it at once.
			if _, err := q.GetRoutingKey(); err == nil {
				if _, loaded := p.routed.LoadOrStore(text, struct{}{}); !loaded {
					p.routedLen.Add(1)
				}
			}
		}
		picked <- p.HostSelectionPolicy.Pick(q)
	}()
	t := time.NewTimer(routingWait)
	defer t.Stop()
	select {
	case next := <-picked:
		return p.health.deferSuspect(next)
	case <-t.C:
		select {
		case next := <-picked: // both ready after the process was descheduled
			return p.health.deferSuspect(next)
		default:
			return p.fallback.Pick(q)
		}
	}
}

// routingText is the statement text the driver keys its routing lookup by: a query's, or a
// batch's first entry's.
func routingText(q gocql.ExecutableStatement) (string, bool) {
	if q == nil {
		return "", false
	}
	switch st := q.Statement().(type) {
	case *gocql.Query:
		return st.Statement(), true
	case *gocql.Batch:
		if len(st.Entries) > 0 {
			return st.Entries[0].Stmt, true
		}
	}
	return "", false
}

// AddHosts forwards the driver's bulk host registration, which it only finds on the policy
// itself.
func (p *quickRouting) AddHosts(hosts []*gocql.HostInfo) {
	if bulk, ok := p.HostSelectionPolicy.(interface{ AddHosts([]*gocql.HostInfo) }); ok {
		bulk.AddHosts(hosts)
		return
	}
	for _, h := range hosts {
		p.HostSelectionPolicy.AddHost(h)
	}
}
