package shop_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/projection"
	"github.com/shardmart/shardmart/internal/shop"
)

func openShop(t *testing.T, path string, staleAfter time.Duration) *shop.Shop {
	t.Helper()
	s, err := shop.Open(context.Background(), shop.Config{Backends: placement.Options{SQLitePath: path}, CacheStaleAfter: staleAfter})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func follow(t *testing.T, s *shop.Shop) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.FollowChanges(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, 5*time.Second, "the tail to start", func() bool { return s.CacheFollowing() == nil })
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("waited %s for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func price(t *testing.T, s *shop.Shop, category, id string) money.Amount {
	t.Helper()
	pg, err := s.Stores.Catalog.SearchProducts(context.Background(), catalog.Search{Category: category})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pg.Items {
		if p.ID == id {
			return p.Price
		}
	}
	t.Fatalf("%s not in the search of %s", id, category)
	return 0
}

// twoShopsWithMug opens two shops on one embedded store (two processes' worth of caches and
// projectors) holding a mug at 12.50 in kitchen, applied by A's projector.
func twoShopsWithMug(t *testing.T) (a, b *shop.Shop) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shop.db")
	a, b = openShop(t, path, 0), openShop(t, path, 0)
	if err := a.Stores.Products.CreateProduct(ctx, catalog.Product{ID: "mug", Name: "Mug", Category: "kitchen", Price: 1250,
		Stock: map[string]int64{"eu-west": 5}, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Projector.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestEveryProcessSeesEveryChange: two shops on one store (two processes' worth of caches and
// projectors). A price change applied by A's projector alone reaches B's cached search through
// B's own outbox tail, within the staleness bound: before the tail, B kept the old price for as
// long as it cached the category.
func TestEveryProcessSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	a, b := twoShopsWithMug(t)
	follow(t, a)
	follow(t, b)
	for i, want := range []money.Amount{1500, 1750, 990} {
		if price(t, b, "kitchen", "mug") == want {
			t.Fatalf("change %d: already at %s", i, want)
		}
		if _, err := a.Stores.Products.UpdateProduct(ctx, "mug", func(p *catalog.Product) error { p.Price = want; return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Projector.Drain(ctx); err != nil { // only A's projector runs
			t.Fatal(err)
		}
		for _, s := range []*shop.Shop{a, b} {
			took := waitFor(t, 5*time.Second, "the new price in every cached search", func() bool { return price(t, s, "kitchen", "mug") == want })
			t.Logf("change %d visible after %s", i, took)
		}
		if st := b.Tail.State(); st.Resets != 0 {
			t.Errorf("tail resets %d, want none", st.Resets)
		}
	}
}

// TestPrunedChangeReachesEveryCache: B caches a category; A changes a price, A's projector
// applies it and a purge deletes the outbox row before B's tail reads it (pruning goes exactly
// as far as the projector's checkpoint, so this is the common case with several processes, not
// a corner). B's next tail poll must still make B's search show the new price: B's tail used to
// see no row after its position, took that for "nothing new", and B served the old price until
// some later message landed in the same outbox partition.
func TestPrunedChangeReachesEveryCache(t *testing.T) {
	ctx := context.Background()
	a, b := twoShopsWithMug(t)
	// B's tail is polled by hand: the race is the prune landing between two polls.
	if err := b.Tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := price(t, b, "kitchen", "mug"); got != 1250 {
		t.Fatalf("B's first search: %s, want 12.50", got)
	}
	if _, err := a.Stores.Products.UpdateProduct(ctx, "mug", func(p *catalog.Product) error { p.Price = 1500; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Projector.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := outbox.Prune(ctx, a.Stores.Outbox, a.OutboxConsumers())
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted == 0 {
		t.Fatalf("prune deleted nothing (%+v): the race is not set up", res)
	}
	if err := b.Tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := price(t, b, "kitchen", "mug"); got != 1500 {
		t.Errorf("B's search after its tail polled: %s, want 15.00 (the change whose row was pruned unread)", got)
	}
	if st := b.Tail.State(); st.Resets != 1 {
		t.Errorf("B's tail resets %d, want 1", st.Resets)
	}
}

// TestStaleCacheIsBypassed: a tail further behind than the bound makes search read the store
// (nothing is loaded into the cache) and CacheFollowing say why.
func TestStaleCacheIsBypassed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shop.db")
	// A bound no poll can meet: the tail is always behind it.
	s := openShop(t, path, time.Nanosecond)
	if err := s.Stores.Products.CreateProduct(ctx, catalog.Product{ID: "mug", Name: "Mug", Category: "kitchen", Price: 1250,
		Stock: map[string]int64{"eu-west": 5}, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.FollowChanges(fctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, 5*time.Second, "CacheFollowing to say the tail is behind", func() bool { return errors.Is(s.CacheFollowing(), shop.ErrCacheBehind) })
	if got := price(t, s, "kitchen", "mug"); got != 1250 {
		t.Errorf("price %s, want 12.50", got)
	}
	type statser interface{ Stats() catalog.CacheStats }
	if st := s.Stores.Catalog.(statser).Stats(); st.Categories != 0 {
		t.Errorf("the stale cache loaded %d categories; want search to bypass it", st.Categories)
	}
}

// TestUnleasedConcurrentDrains: three shops on one embedded store drain the outbox under the
// one shared consumer name at once (nothing leases the embedded outbox: serve lets one process
// open it; MongoDB's leased drains are mongostore's TestProjectorsShareTheDrainLease), and
// prune it, while orders are placed through them. The shared checkpoint never moves backwards
// (it did before SaveCheckpoint became conditional); whichever process drained, the process
// that placed an order finds its follow-ups applied when PlaceFromCart returns (Sync), and so
// does a third; one history entry per order; and in the end the outbox drains and prunes to
// nothing.
func TestUnleasedConcurrentDrains(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shop.db")
	shops := []*shop.Shop{openShop(t, path, 0), openShop(t, path, 0), openShop(t, path, 0)}
	if err := shops[0].Stores.Products.CreateProduct(ctx, catalog.Product{ID: "mug", Name: "Mug", Category: "kitchen", Price: 1250,
		Stock: map[string]int64{"eu-west": 1000}, CreatedAt: time.Now(), UpdatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	bg, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, s := range shops {
		wg.Add(2)
		go func() { defer wg.Done(); s.Projector.Run(bg, 5*time.Millisecond) }()
		go func() { // every process prunes, as serve does
			defer wg.Done()
			for bg.Err() == nil {
				_, _ = outbox.Prune(bg, s.Stores.Outbox, s.OutboxConsumers())
				time.Sleep(3 * time.Millisecond)
			}
		}()
	}
	backwards := make(chan string, 1)
	wg.Add(1)
	go func() { // the checkpoint as any process reads it: never lower than before
		defer wg.Done()
		var last int64
		for bg.Err() == nil {
			cp, err := shops[0].Stores.Outbox.Checkpoint(bg, projection.Consumer)
			if err == nil && cp < last {
				select {
				case backwards <- fmt.Sprintf("checkpoint went from %d back to %d", last, cp):
				default:
				}
			}
			last = max(last, cp)
		}
	}()

	const users = 30
	errs := make(chan error, users)
	var orders sync.WaitGroup
	for i := range users {
		orders.Add(1)
		go func() {
			defer orders.Done()
			uid := fmt.Sprintf("u%d", i)
			cartVia, orderVia, readVia := shops[i%3], shops[(i+1)%3], shops[(i+2)%3]
			if _, err := cartVia.Carts.Put(ctx, cart.User(uid), time.Time{}, "mug", 2); err != nil {
				errs <- err
				return
			}
			o, _, err := orderVia.Orders.PlaceFromCart(ctx, uid, "eu-west", "k-"+uid)
			if err != nil {
				errs <- err
				return
			}
			for _, s := range []*shop.Shop{orderVia, readVia} {
				pg, err := s.Stores.History.ListHistory(ctx, uid, paging.Request{})
				if err != nil || len(pg.Items) != 1 || pg.Items[0].OrderID != o.ID {
					errs <- fmt.Errorf("user %s right after the order: history %+v, %v; want its order", uid, pg.Items, err)
				}
				if _, err := s.Stores.Carts.ActiveCart(ctx, cart.User(uid), time.Now()); !errors.Is(err, cart.ErrNotFound) {
					errs <- fmt.Errorf("user %s right after the order: cart still active (%v)", uid, err)
				}
			}
		}()
	}
	orders.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitFor(t, 10*time.Second, "the outbox drained and pruned", func() bool {
		lag, err1 := shops[1].Projector.Lag(ctx)
		rows, err2 := shops[2].Stores.Outbox.CountOutbox(ctx)
		return err1 == nil && err2 == nil && lag == 0 && rows == 0
	})
	select {
	case msg := <-backwards:
		t.Error(msg)
	default:
	}
	for i := range users {
		pg, err := shops[0].Stores.History.ListHistory(ctx, fmt.Sprintf("u%d", i), paging.Request{})
		if err != nil || len(pg.Items) != 1 {
			t.Errorf("user u%d: %d history entries, %v; want exactly one", i, len(pg.Items), err)
		}
	}
	p, err := shops[2].Stores.Products.GetProduct(ctx, "mug")
	if err != nil || p.Stock["eu-west"] != 1000-2*users {
		t.Errorf("stock %v, %v; want %d", p.Stock, err, 1000-2*users)
	}
}
