package placement

// fills take each family's repositories from the backend the placement gives it, false when
// that backend cannot provide them. Every family of internal/family has one (a test holds
// it), so a new family is a new entry here beside its provider interface.
var fills = map[Family]func(s *Stores, b backend, cfg Config) bool{
	Orders: func(s *Stores, b backend, _ Config) bool {
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
	},
	Carts:    fillFrom(func(s *Stores, p cartsProvider) { s.Carts = p.Carts() }),
	Sessions: fillFrom(func(s *Stores, p sessionsProvider) { s.Sessions = p.Sessions() }),
	Events:   fillFrom(func(s *Stores, p eventsProvider) { s.Events = p.Events() }),
	History:  fillFrom(func(s *Stores, p historyProvider) { s.History = p.History() }),
	// On the transactional backend the catalog is the products table itself (Orders' fill).
	Catalog: func(s *Stores, b backend, cfg Config) bool {
		if cfg[Catalog] == cfg[Orders] {
			return true
		}
		p, ok := b.(catalogProvider)
		if ok {
			s.Catalog, s.CatalogSink = p.Catalog(), p.CatalogSink()
		}
		return ok
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
