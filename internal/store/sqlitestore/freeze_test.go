package sqlitestore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/store"
)

// A freeze is exact: stock writers race the freeze, and the stock read at any snapshot after
// Freeze returned is the final one; every write refused is a store.ErrFrozen that is also
// store.ErrUnavailable (503) and says nothing committed. Reads keep working, the outbox
// checkpoints freeze on their own scope, and Unfreeze lets writes commit again.
func TestFreezeStopsEveryLaterWriteOfTheFamily(t *testing.T) {
	ctx := context.Background()
	db := openTest(t, defaultDriver)
	now := time.Now().UTC()
	p := catalog.Product{ID: "mug", Name: "Mug", Category: "kitchen", Price: money.Amount(1250), Stock: map[string]int64{"eu-west": 0},
		CreatedAt: now, UpdatedAt: now}
	if err := db.Products().CreateProduct(ctx, p); err != nil {
		t.Fatal(err)
	}
	var committed, refused atomic.Int64
	var wrong atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err := db.Products().AdjustStock(ctx, p.Ref(), "eu-west", 1)
				var ue *store.UnavailableError
				switch {
				case err == nil:
					committed.Add(1)
				case errors.Is(err, store.ErrFrozen) && errors.As(err, &ue) && ue.NothingCommitted() && ue.RetryAfter > 0:
					refused.Add(1)
				default:
					wrong.Store(err)
					return
				}
			}
		}()
	}
	eventually.True(t, 30*time.Second, "20 stock writes", func() bool { return committed.Load() >= 20 })
	if _, err := db.Freeze(ctx, ordersScope, "test"); err != nil {
		t.Fatal(err)
	}
	snap, err := db.ReadSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var atFreeze int64
	if err := snap.Products(ctx, func(p catalog.Product) error { atFreeze = p.Stock["eu-west"]; return nil }); err != nil {
		t.Fatal(err)
	}
	_ = snap.Close()
	eventually.True(t, 30*time.Second, "20 stock writes refused", func() bool { return refused.Load() >= 20 })
	close(stop)
	wg.Wait()
	if err, _ := wrong.Load().(error); err != nil {
		t.Fatalf("a stock write failed otherwise than frozen: %v", err)
	}
	got, err := db.Products().GetProduct(ctx, "mug") // reads work in the freeze
	if err != nil {
		t.Fatal(err)
	}
	if got.Stock["eu-west"] != atFreeze || atFreeze != committed.Load() {
		t.Errorf("stock %d now, %d at the freeze, %d writes acknowledged: a write committed after the freeze or one was lost", got.Stock["eu-west"], atFreeze, committed.Load())
	}
	if err := db.Users().CreateUser(ctx, account.User{ID: "u1", Email: "a@example.com", PasswordHash: "x", CreatedAt: now}); !errors.Is(err, store.ErrFrozen) {
		t.Errorf("a registration in the freeze: %v, want ErrFrozen", err)
	}
	if err := db.Outbox().SaveCheckpoint(ctx, "projector", 1); err != nil {
		t.Errorf("a checkpoint with only the family frozen: %v", err)
	}
	if _, err := db.Freeze(ctx, FreezeOutboxCheckpoints, "test"); err != nil {
		t.Fatal(err)
	}
	if err := db.Outbox().SaveCheckpoint(ctx, "projector", 2); !errors.Is(err, store.ErrFrozen) {
		t.Errorf("a checkpoint with the checkpoints frozen: %v, want ErrFrozen", err)
	}
	if err := db.Unfreeze(ctx, ordersScope); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Products().AdjustStock(ctx, p.Ref(), "eu-west", 1); err != nil {
		t.Errorf("a write after Unfreeze: %v", err)
	}
	if _, frozen, err := db.FrozenSince(ctx, ordersScope); err != nil || frozen {
		t.Errorf("after Unfreeze: frozen %t, %v", frozen, err)
	}
}
