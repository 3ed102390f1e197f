package storetest

import (
	"testing"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/session"
)

// Backend is what one backend offers the contract suite: a repository per family it can hold
// (nil: it cannot, and NotHeld says why). Factories may return shared repositories: every case
// uses fresh random identifiers.
type Backend struct {
	Products func(t *testing.T) catalog.Repository
	Orders   func(t *testing.T) OrderStore // orders with their products and outbox
	Users    func(t *testing.T) account.Repository
	Carts    func(t *testing.T) cart.Repository
	Sessions func(t *testing.T) session.Repository
	Events   func(t *testing.T) event.Repository
	History  func(t *testing.T) history.Repository
	Catalog  func(t *testing.T) ReadModel // a projector-fed catalog read model
	// CachedSearch is the card cache over this backend's catalog reads.
	CachedSearch func(t *testing.T) CachedSearchStore
	// Outbox returns a fresh, empty outbox (a new database) for the pruning contract.
	Outbox func(t *testing.T) OutboxStore
	// Checkout pairs this backend's carts with an order store (its own, or another backend's
	// in a placement the product runs) for the whole-checkout races.
	Checkout func(t *testing.T) CheckoutStore
	// NotHeld names, per family the backend cannot hold, why; Run says so in the log.
	NotHeld map[string]string
}

// Run is THE entry point: every family the backend holds, each under its own name, and a
// line per family it does not hold saying why. A family that is neither held nor explained
// fails the run, so a new family cannot be forgotten silently.
func Run(t *testing.T, b Backend) {
	families := []struct {
		name string
		run  func(t *testing.T) bool
	}{
		{"products", func(t *testing.T) bool { return suite(t, Products, b.Products) }},
		{"orders", func(t *testing.T) bool { return suite(t, Orders, b.Orders) }},
		{"users", func(t *testing.T) bool { return suite(t, Users, b.Users) }},
		{"carts", func(t *testing.T) bool {
			return suite(t, Carts, b.Carts) && suite(t, CartCheckout, b.Carts)
		}},
		{"checkout", func(t *testing.T) bool { return suite(t, Checkout, b.Checkout) }},
		{"sessions", func(t *testing.T) bool { return suite(t, Sessions, b.Sessions) }},
		{"events", func(t *testing.T) bool { return suite(t, Events, b.Events) }},
		{"history", func(t *testing.T) bool { return suite(t, History, b.History) }},
		{"outbox", func(t *testing.T) bool { return suite(t, Outbox, b.Outbox) }},
		{"catalog read model", func(t *testing.T) bool { return suite(t, CatalogReadModel, b.Catalog) }},
		{"cached search", func(t *testing.T) bool { return suite(t, CachedSearch, b.CachedSearch) }},
	}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			if f.run(t) {
				return
			}
			why, ok := b.NotHeld[f.name]
			if !ok {
				t.Fatalf("the backend neither provides %s nor says why not (Backend.NotHeld)", f.name)
			}
			t.Logf("not held by this backend: %s", why)
		})
	}
}

// suite runs a contract suite on the backend's repository; false: the backend provides none.
func suite[R any](t *testing.T, run func(*testing.T, func(*testing.T) R), repo func(*testing.T) R) bool {
	if repo == nil {
		return false
	}
	run(t, repo)
	return true
}

// Store is a backend that holds every family but a projector-fed catalog read model in one
// store, its own catalog being the store of record (the embedded store, MongoDB).
type Store interface {
	Products() catalog.Repository
	Orders() order.Repository
	Outbox() outbox.Log
	Users() account.Repository
	Carts() cart.Repository
	Sessions() session.Repository
	Events() event.Repository
	History() history.Repository
}

// WholeStore is the contract suite's view of s: every family on s, but the outbox cases on a
// fresh, empty store from fresh; noReadModel says why s has no catalog read model.
func WholeStore[S Store](s S, fresh func(*testing.T) S, noReadModel string) Backend {
	orders := func() OrderStore { return OrderStore{Orders: s.Orders(), Products: s.Products(), Outbox: s.Outbox()} }
	return Backend{
		Products: func(*testing.T) catalog.Repository { return s.Products() },
		Orders:   func(*testing.T) OrderStore { return orders() },
		Users:    func(*testing.T) account.Repository { return s.Users() },
		Carts:    func(*testing.T) cart.Repository { return s.Carts() },
		Sessions: func(*testing.T) session.Repository { return s.Sessions() },
		Events:   func(*testing.T) event.Repository { return s.Events() },
		History:  func(*testing.T) history.Repository { return s.History() },
		Checkout: func(*testing.T) CheckoutStore {
			return CheckoutStore{Carts: s.Carts(), Orders: s.Orders(), Products: s.Products()}
		},
		CachedSearch: func(*testing.T) CachedSearchStore {
			return CachedSearchStore{Orders: orders(), Reader: s.Products()}
		},
		Outbox: func(t *testing.T) OutboxStore {
			f := fresh(t)
			return OutboxStore{Products: f.Products(), Outbox: f.Outbox()}
		},
		NotHeld: map[string]string{"catalog read model": noReadModel},
	}
}
