package sqlitestore

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
			storetest.Run(t, storetest.Backend{
				Products: func(*testing.T) catalog.Repository { return db.Products() },
				Orders: func(*testing.T) storetest.OrderStore {
					return storetest.OrderStore{Orders: db.Orders(), Products: db.Products(), Outbox: db.Outbox()}
				},
				Users:    func(*testing.T) account.Repository { return db.Users() },
				Carts:    func(*testing.T) cart.Repository { return db.Carts() },
				Sessions: func(*testing.T) session.Repository { return db.Sessions() },
				Events:   func(*testing.T) event.Repository { return db.Events() },
				History:  func(*testing.T) history.Repository { return db.History() },
				Checkout: func(*testing.T) storetest.CheckoutStore {
					return storetest.CheckoutStore{Carts: db.Carts(), Orders: db.Orders(), Products: db.Products()}
				},
				CachedSearch: func(*testing.T) storetest.CachedSearchStore {
					return storetest.CachedSearchStore{Orders: storetest.OrderStore{Orders: db.Orders(), Products: db.Products(), Outbox: db.Outbox()},
						Reader: db.Products()}
				},
				Outbox: func(t *testing.T) storetest.OutboxStore {
					fresh := openTest(t, drv)
					return storetest.OutboxStore{Products: fresh.Products(), Outbox: fresh.Outbox()}
				},
				NotHeld: map[string]string{"catalog read model": "embedded, the catalog family is the products table itself, not a projector-fed model"},
			})
		})
	}
}
