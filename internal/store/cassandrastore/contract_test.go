package cassandrastore

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

// TestContract runs THE contract suite for every family this backend can hold.
func TestContract(t *testing.T) {
	st := store(t)
	storetest.Run(t, storetest.Backend{
		Carts:    func(*testing.T) cart.Repository { return st.Carts() },
		Sessions: func(*testing.T) session.Repository { return st.Sessions() },
		Events:   func(*testing.T) event.Repository { return st.Events() },
		History:  func(*testing.T) history.Repository { return st.History() },
		Catalog:  func(*testing.T) storetest.ReadModel { return st.Catalog() },
		// Carts here, orders and products in SQLite: a placement the product runs
		// (carts=cassandra, orders=sqlite), so the freeze and the order store's fence meet as
		// they do in production.
		Checkout: func(t *testing.T) storetest.CheckoutStore {
			db := ordersDB(t)
			return storetest.CheckoutStore{Carts: st.Carts(), Orders: db.Orders(), Products: db.Products()}
		},
		// The catalog=cassandra placement: writes and orders in SQLite, search from the read
		// model the projector feeds, the card cache over it.
		CachedSearch: func(t *testing.T) storetest.CachedSearchStore {
			db := ordersDB(t)
			return storetest.CachedSearchStore{Orders: storetest.OrderStore{Orders: db.Orders(), Products: db.Products(), Outbox: db.Outbox()},
				Reader: st.Catalog(), Sink: st.Catalog()}
		},
		NotHeld: map[string]string{
			"products": "no multi-row transactions: products and their stock stay with the orders (SQLite or MongoDB); the catalog read model is tested instead",
			"orders":   "no multi-row transactions for stock, order and outbox together (placement refuses orders=cassandra)",
			"outbox":   "the outbox commits with the orders, which Cassandra cannot hold; it feeds the catalog read model from SQLite or MongoDB",
			"users":    "accounts stay with the orders store (unique e-mails need a transaction or a claim)",
		},
	})
}

// ordersDB is an embedded order store beside the cluster, as placements pair them.
func ordersDB(t *testing.T) *sqlitestore.DB {
	t.Helper()
	db, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "orders.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
