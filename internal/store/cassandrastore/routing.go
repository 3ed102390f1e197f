package cassandrastore

import (
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
type quickRouting struct {
	gocql.HostSelectionPolicy // token aware
	fallback                  gocql.HostSelectionPolicy
	// health defers a host that became suspect after the token-aware order was made.
	health *hostHealth
}

func (p *quickRouting) Pick(q gocql.ExecutableStatement) gocql.NextHost {
	picked := make(chan gocql.NextHost, 1)
	go func() { picked <- p.HostSelectionPolicy.Pick(q) }()
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
