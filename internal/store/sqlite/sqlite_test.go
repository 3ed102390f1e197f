package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

// each contract family runs on its own fresh database file, and on both drivers we measured.
func openTest(t *testing.T, drv driver) *DB {
	t.Helper()
	db, err := open(context.Background(), filepath.Join(t.TempDir(), "test.db"), drv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestContract(t *testing.T) {
	for _, drv := range []driver{mattn, modernc} {
		t.Run(drv.name, func(t *testing.T) {
			db := openTest(t, drv)
			storetest.Products(t, func(*testing.T) catalog.Repository { return db.Products() })
			storetest.Orders(t, func(*testing.T) storetest.OrderStore {
				return storetest.OrderStore{Orders: db.Orders(), Products: db.Products(), Outbox: db.Outbox()}
			})
			storetest.Carts(t, func(*testing.T) cart.Repository { return db.Carts() })
			storetest.CartCheckout(t, func(*testing.T) cart.Repository { return db.Carts() })
			storetest.Checkout(t, func(*testing.T) storetest.CheckoutStore {
				return storetest.CheckoutStore{Carts: db.Carts(), Orders: db.Orders(), Products: db.Products()}
			})
			storetest.Sessions(t, func(*testing.T) session.Repository { return db.Sessions() })
			storetest.Events(t, func(*testing.T) event.Repository { return db.Events() })
			storetest.Users(t, func(*testing.T) account.Repository { return db.Users() })
			storetest.History(t, func(*testing.T) history.Repository { return db.History() })
		})
	}
}
