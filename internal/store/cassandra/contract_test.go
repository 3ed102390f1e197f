package cassandra

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/sqlite"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

// TestContract runs THE contract suite for every family this backend can hold.
func TestContract(t *testing.T) {
	st := store(t)
	t.Run("carts", func(t *testing.T) {
		storetest.Carts(t, func(*testing.T) cart.Repository { return st.Carts() })
	})
	t.Run("cart checkout", func(t *testing.T) {
		storetest.CartCheckout(t, func(*testing.T) cart.Repository { return st.Carts() })
	})
	// Carts here, orders and products in SQLite: a placement the product runs
	// (carts=cassandra, orders=sqlite), so the freeze and the order store's fence meet as they
	// do in production.
	t.Run("checkout", func(t *testing.T) {
		storetest.Checkout(t, func(t *testing.T) storetest.CheckoutStore {
			db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "orders.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return storetest.CheckoutStore{Carts: st.Carts(), Orders: db.Orders(), Products: db.Products()}
		})
	})
	t.Run("sessions", func(t *testing.T) {
		storetest.Sessions(t, func(*testing.T) session.Repository { return st.Sessions() })
	})
	t.Run("events", func(t *testing.T) {
		storetest.Events(t, func(*testing.T) event.Repository { return st.Events() })
	})
	t.Run("history", func(t *testing.T) {
		storetest.History(t, func(*testing.T) history.Repository { return st.History() })
	})
}
