package projection_test

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/projection"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// countedHistory counts history writes.
type countedHistory struct {
	history.Repository
	upserts atomic.Int64
}

func (c *countedHistory) UpsertEntry(ctx context.Context, e history.Entry) error {
	c.upserts.Add(1)
	return c.Repository.UpsertEntry(ctx, e)
}

// countedSink counts catalog upserts per product and keeps the last stock written.
type countedSink struct {
	mu    sync.Mutex
	n     map[string]int
	stock map[string]int64
}

func (s *countedSink) UpsertProduct(_ context.Context, p catalog.Product) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n[p.ID]++
	s.stock[p.ID] = p.Stock["eu"]
	return nil
}

// TestCheckoutAppliesItsOwnFollowUpsOnce: on the embedded store, an order's request applies its
// follow-ups (history, cart, the catalog's stock) before it answers, without any drain; the
// drain then recognises the store's message as applied and writes the history no second time,
// but refreshes the catalog again (that copy is the drain's to order across processes).
func TestCheckoutAppliesItsOwnFollowUpsOnce(t *testing.T) {
	ctx := context.Background()
	db, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Products().CreateProduct(ctx, catalog.Product{ID: "p1", Name: "Thing", Category: "things",
		Price: money.MustParse("2.00"), Stock: map[string]int64{"eu": 10}}); err != nil {
		t.Fatal(err)
	}
	hist := &countedHistory{Repository: db.History()}
	sink := &countedSink{n: map[string]int{}, stock: map[string]int64{}}
	proj := outbox.NewProjector(db.Outbox(), projection.Consumer, nil)
	projection.Register(proj, projection.Targets{Carts: db.Carts(), History: hist, Catalog: sink, Products: db.Products()})
	if _, err := proj.Drain(ctx); err != nil { // the product's creation
		t.Fatal(err)
	}
	svc := &order.Service{Orders: db.Orders(), Carts: &cart.Service{Carts: db.Carts(), Orders: db.Orders(), Now: time.Now},
		FollowUps: projection.Inline{P: proj}, Now: time.Now}
	owner := cart.User("u1")
	now := time.Now().UTC()
	if _, err := db.Carts().PutItem(ctx, owner, cart.Item{ProductID: "p1", Category: "things", Quantity: 3, AddedAt: now}, time.Time{}, now); err != nil {
		t.Fatal(err)
	}
	o, _, err := svc.PlaceFromCart(ctx, "u1", "eu", "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Carts().ActiveCart(ctx, owner, time.Now()); !errors.Is(err, cart.ErrNotFound) {
		t.Errorf("the ordered cart is still active when the order answered: %v", err)
	}
	page, err := db.History().ListHistory(ctx, "u1", paging.Request{})
	if err != nil || len(page.Items) != 1 || page.Items[0].OrderID != o.ID {
		t.Fatalf("history when the order answered: %+v, %v; want order %s", page.Items, err, o.ID)
	}
	sink.mu.Lock()
	stock := sink.stock["p1"]
	sink.mu.Unlock()
	if stock != 7 {
		t.Errorf("catalog stock when the order answered: %d, want 7", stock)
	}
	if lag, _ := proj.Lag(ctx); lag != 1 {
		t.Errorf("lag %d, want the order's message still to drain", lag)
	}
	if _, err := proj.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := hist.upserts.Load(); n != 1 {
		t.Errorf("history written %d times, want once: the drain must know the order's message for applied", n)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.n["p1"] != 3 || sink.stock["p1"] != 7 {
		t.Errorf("catalog: %d upserts ending at stock %d, want 3 (creation, order, the drain's) at 7", sink.n["p1"], sink.stock["p1"])
	}
}

// slowSource counts reads and holds the first until released.
type slowSource struct {
	reads   atomic.Int64
	first   chan struct{}
	release chan struct{}
	stock   atomic.Int64
}

func (s *slowSource) GetProduct(_ context.Context, id string) (catalog.Product, error) {
	if s.reads.Add(1) == 1 {
		close(s.first)
		<-s.release
	}
	return catalog.Product{ID: id, Stock: map[string]int64{"eu": s.stock.Load()}}, nil
}

// TestRefreshesOfOneProductCoalesce: refreshes of one product asked for while one runs share
// the next one, which reads after all of them were asked for: two reads for a burst, ending at
// the latest stock.
func TestRefreshesOfOneProductCoalesce(t *testing.T) {
	src := &slowSource{first: make(chan struct{}), release: make(chan struct{})}
	src.stock.Store(10)
	sink := &countedSink{n: map[string]int{}, stock: map[string]int64{}}
	proj := outbox.NewProjector(nil, projection.Consumer, nil)
	var asked atomic.Int64 // refresh handlers run in registration order: this one, then the catalog's
	proj.Refresh(outbox.TopicProductChanged, func(context.Context, outbox.Message) error {
		asked.Add(1)
		return nil
	})
	projection.RegisterCatalog(proj.Refreshers(), sink, src)
	msg := outbox.Message{Topic: outbox.TopicProductChanged, Key: "p1", Payload: []byte(`{"ID":"p1"}`)}
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { first <- proj.Apply(ctx, msg) }()
	<-src.first // a refresh is reading
	src.stock.Store(4)
	const burst = 20
	errs := make(chan error, burst)
	for range burst {
		go func() { errs <- proj.Apply(ctx, msg) }()
	}
	// The burst asks while the first read is held: its refresh cannot start before that ends.
	for asked.Load() < burst+1 {
		runtime.Gosched()
	}
	close(src.release)
	for range burst {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if r := src.reads.Load(); r > 3 || sink.stock["p1"] != 4 {
		t.Errorf("%d reads for %d refreshes, ending at stock %d; want at most 3 reads (coalesced), ending at 4", r, burst+1, sink.stock["p1"])
	}
}
