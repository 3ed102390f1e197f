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

// gatedHistory holds the history writes of one user until released, and fails the first
// write of another user's: a store that hangs for one buyer, and one that fails once.
type gatedHistory struct {
	history.Repository
	slowUser, failUser string
	entered, release   chan struct{}
	failed             atomic.Bool
}

func (g *gatedHistory) UpsertEntry(ctx context.Context, e history.Entry) error {
	switch {
	case e.UserID == g.slowUser:
		close(g.entered)
		select {
		case <-g.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	case e.UserID == g.failUser && g.failed.CompareAndSwap(false, true):
		return errors.New("history store unavailable")
	}
	return g.Repository.UpsertEntry(ctx, e)
}

// shopOf opens an embedded store with product p1 and a cart of it for each user, and an order
// service whose follow-ups are applied inline, history going through hist.
func shopOf(t *testing.T, hist func(history.Repository) history.Repository, users ...string) (*sqlitestore.DB, *outbox.Projector, *order.Service) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Products().CreateProduct(ctx, catalog.Product{ID: "p1", Name: "Thing", Category: "things",
		Price: money.MustParse("2.00"), Stock: map[string]int64{"eu": 100}}); err != nil {
		t.Fatal(err)
	}
	proj := outbox.NewProjector(db.Outbox(), projection.Consumer, nil)
	projection.Register(proj, projection.Targets{Carts: db.Carts(), History: hist(db.History())})
	now := time.Now().UTC()
	for _, u := range users {
		if _, err := db.Carts().PutItem(ctx, cart.User(u), cart.Item{ProductID: "p1", Category: "things", Quantity: 1, AddedAt: now}, time.Time{}, now); err != nil {
			t.Fatal(err)
		}
	}
	svc := &order.Service{Orders: db.Orders(), Carts: &cart.Service{Carts: db.Carts(), Orders: db.Orders(), Now: time.Now},
		FollowUps: projection.Inline{P: proj}, SyncWait: time.Minute, Now: time.Now}
	return db, proj, svc
}

// inHistory reports whether user's history holds order id.
func inHistory(t *testing.T, db *sqlitestore.DB, user, id string) bool {
	t.Helper()
	page, err := db.History().ListHistory(context.Background(), user, paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range page.Items {
		if e.OrderID == id {
			return true
		}
	}
	return false
}

// TestCheckoutDoesNotWaitForAnotherUsersFollowUps: user A's history store hangs inside A's
// checkout; user B's checkout answers meanwhile, its order in B's history at once. (Waiting
// for a drain of everyone's follow-ups, B waited for A's.)
func TestCheckoutDoesNotWaitForAnotherUsersFollowUps(t *testing.T) {
	gate := &gatedHistory{slowUser: "a", entered: make(chan struct{}), release: make(chan struct{})}
	db, _, svc := shopOf(t, func(h history.Repository) history.Repository { gate.Repository = h; return gate }, "a", "b")
	ctx := context.Background()
	aDone := make(chan error, 1)
	var aOrder order.Order
	go func() {
		var err error
		aOrder, _, err = svc.PlaceFromCart(ctx, "a", "eu", "key-a")
		aDone <- err
	}()
	<-gate.entered
	bDone := make(chan error, 1)
	var bOrder order.Order
	go func() {
		var err error
		bOrder, _, err = svc.PlaceFromCart(ctx, "b", "eu", "key-b")
		bDone <- err
	}()
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatalf("B's checkout: %v", err)
		}
	case <-time.After(10 * time.Second):
		close(gate.release)
		t.Fatal("B's checkout did not answer while A's follow-up hung")
	}
	if !inHistory(t, db, "b", bOrder.ID) {
		t.Errorf("B's history does not hold order %s when B's checkout answered", bOrder.ID)
	}
	select {
	case err := <-aDone:
		t.Fatalf("A's checkout answered (%v) before its history was written", err)
	default:
	}
	close(gate.release)
	if err := <-aDone; err != nil {
		t.Fatalf("A's checkout: %v", err)
	}
	if !inHistory(t, db, "a", aOrder.ID) {
		t.Errorf("A's history does not hold order %s when A's checkout answered", aOrder.ID)
	}
}

// TestFailedFollowUpIsAppliedByTheDrain: the buyer's history write fails inside the checkout;
// the order is placed all the same, and the background drain writes the entry.
func TestFailedFollowUpIsAppliedByTheDrain(t *testing.T) {
	gate := &gatedHistory{failUser: "u1"}
	db, proj, svc := shopOf(t, func(h history.Repository) history.Repository { gate.Repository = h; return gate }, "u1")
	ctx := context.Background()
	o, created, err := svc.PlaceFromCart(ctx, "u1", "eu", "key-1")
	if err != nil || !created {
		t.Fatalf("checkout: created=%v %v; want the order placed although a follow-up failed", created, err)
	}
	if !gate.failed.Load() || inHistory(t, db, "u1", o.ID) {
		t.Fatalf("history write failed %v, entry present %v: want the failure, and no entry yet", gate.failed.Load(), inHistory(t, db, "u1", o.ID))
	}
	if _, err := proj.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if !inHistory(t, db, "u1", o.ID) {
		t.Errorf("order %s not in the history after the drain", o.ID)
	}
	if lag, err := proj.Lag(ctx); err != nil || lag != 0 {
		t.Errorf("lag %d (%v) after the drain, want 0", lag, err)
	}
}

type panickingSink struct{}

func (panickingSink) UpsertProduct(context.Context, catalog.Product) error { panic("sink crashed") }

// TestCatalogRefreshPanicReachesTheCaller: a catalog copy runs in the refresher's goroutine,
// shared by every caller refreshing the product, and per order line at once; its panic is
// raised in the caller that applies the message, which can recover it, for a product's change
// and for an order of several lines.
func TestCatalogRefreshPanicReachesTheCaller(t *testing.T) {
	src := &slowSource{first: make(chan struct{}), release: make(chan struct{})}
	close(src.release)
	proj := outbox.NewProjector(nil, projection.Consumer, nil)
	projection.RegisterCatalog(proj.Refreshers(), panickingSink{}, src)
	for _, m := range []outbox.Message{
		{Topic: outbox.TopicProductChanged, Key: "p1", Payload: []byte(`{"ID":"p1"}`)},
		{Topic: outbox.TopicOrderPlaced, Key: "o1", Payload: []byte(`{"ID":"o1","Items":[{"ProductID":"p1"},{"ProductID":"p2"}]}`)},
	} {
		got := func() (r any) {
			defer func() { r = recover() }()
			_ = proj.Apply(context.Background(), m)
			return nil
		}()
		if got != "sink crashed" {
			t.Errorf("%s: the caller recovered %v, want the sink's panic", m.Topic, got)
		}
	}
}
