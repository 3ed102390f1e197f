package placement

import (
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/session"
)

// slot is how one family's repositories are taken from the backend the placement gives it
// (fill reports false when that backend cannot provide them), and how the dual-write layer
// wraps them while `shardmart migrate` moves the family to Cassandra (nil: it does not move).
// Every family of internal/family has one (a test holds it), so a new family is a new entry
// here beside its provider interface.
type slot struct {
	fill func(s *Stores, b backend, cfg Config) bool
	wrap func(s *Stores, cb cassandraBackend, m *dualWrite, ph *familyPhase)
}

var slots = map[Family]slot{
	Orders: {fill: func(s *Stores, b backend, _ Config) bool {
		op, ok := b.(ordersProvider)
		if !ok {
			return false
		}
		s.Orders, s.Products, s.Outbox, s.Users = op.Orders(), op.Products(), op.Outbox(), op.Users()
		if p, ok := op.(rateLimitsProvider); ok {
			s.RateLimits = p.SharedRateLimits()
		}
		s.Catalog = s.Products
		return true
	}},
	Carts: {
		fill: fillFrom(func(s *Stores, p cartsProvider) { s.Carts = p.Carts() }),
		wrap: func(s *Stores, cb cassandraBackend, m *dualWrite, ph *familyPhase) {
			s.Carts = &dualWriteCarts{pair[cart.Repository]{old: s.Carts, neu: cb.Carts(), m: m, ph: ph}}
		},
	},
	Sessions: {
		fill: fillFrom(func(s *Stores, p sessionsProvider) { s.Sessions = p.Sessions() }),
		wrap: func(s *Stores, cb cassandraBackend, m *dualWrite, ph *familyPhase) {
			s.Sessions = &dualWriteSessions{pair[session.Repository]{old: s.Sessions, neu: cb.Sessions(), m: m, ph: ph}}
		},
	},
	Events: {
		fill: fillFrom(func(s *Stores, p eventsProvider) { s.Events = p.Events() }),
		wrap: func(s *Stores, cb cassandraBackend, m *dualWrite, ph *familyPhase) {
			s.Events = &dualWriteEvents{pair[event.Repository]{old: s.Events, neu: cb.Events(), m: m, ph: ph}}
		},
	},
	History: {
		fill: fillFrom(func(s *Stores, p historyProvider) { s.History = p.History() }),
		wrap: func(s *Stores, cb cassandraBackend, m *dualWrite, ph *familyPhase) {
			s.History = &dualWriteHistory{pair[history.Repository]{old: s.History, neu: cb.History(), m: m, ph: ph}}
		},
	},
	Catalog: {
		// On the transactional backend the catalog is the products table itself (Orders' fill).
		fill: func(s *Stores, b backend, cfg Config) bool {
			if cfg[Catalog] == cfg[Orders] {
				return true
			}
			p, ok := b.(catalogProvider)
			if ok {
				s.Catalog, s.CatalogSink = p.Catalog(), p.CatalogSink()
			}
			return ok
		},
		wrap: func(s *Stores, cb cassandraBackend, _ *dualWrite, ph *familyPhase) {
			s.Catalog = &dualWriteCatalog{pair[CatalogReader]{old: s.Catalog, neu: cb.Catalog(), ph: ph}}
			s.CatalogSink = &catalogSink{neu: cb.CatalogSink(), ph: ph}
		},
	},
}

// fillFrom is a fill taking the family's repositories from a backend that provides P.
func fillFrom[P any](set func(s *Stores, p P)) func(*Stores, backend, Config) bool {
	return func(s *Stores, b backend, _ Config) bool {
		p, ok := b.(P)
		if ok {
			set(s, p)
		}
		return ok
	}
}
