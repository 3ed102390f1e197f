package projection_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/projection"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// gatedSink holds every upsert until want of them are in flight together (or the test's
// patience runs out), then records it.
type gatedSink struct {
	want int

	mu       sync.Mutex
	inFlight int
	all      chan struct{}
	alone    bool // an upsert gave up waiting for the others
	got      map[string]int64
}

func (g *gatedSink) UpsertProduct(_ context.Context, p catalog.Product) error {
	g.mu.Lock()
	if g.inFlight++; g.inFlight == g.want {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-time.After(5 * time.Second): // refreshed one after another: the gate never opens
		g.mu.Lock()
		g.alone = true
		g.mu.Unlock()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got[p.ID] = p.Stock["eu"]
	return nil
}

// failingMarker fails MarkOrdered while fail is set.
type failingMarker struct {
	projection.CartMarker
	fail error
}

func (f *failingMarker) MarkOrdered(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error {
	if f.fail != nil {
		return f.fail
	}
	return f.CartMarker.MarkOrdered(ctx, owner, cartID, orderID, now)
}

// TestOrderFollowUpsRunTogether: an order's products are refreshed into the read model at once,
// and its cart mark and history entry are written side by side, a failure of either failing
// the message so that the next drain applies it again.
func TestOrderFollowUpsRunTogether(t *testing.T) {
	ctx := context.Background()
	db, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ids := []string{"p1", "p2", "p3"}
	var lines []order.Line
	now := time.Now().UTC().Truncate(time.Millisecond)
	owner := cart.User("u1")
	var c cart.Cart
	for _, id := range ids {
		p := catalog.Product{ID: id, Name: id, Category: "things", Price: money.MustParse("2.00"), Stock: map[string]int64{"eu": 10}}
		if err := db.Products().CreateProduct(ctx, p); err != nil {
			t.Fatal(err)
		}
		if c, err = db.Carts().PutItem(ctx, owner, cart.Item{ProductID: id, Category: "things", Quantity: 1, AddedAt: now}, time.Time{}, now); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, order.Line{ProductID: id, Category: "things", Quantity: 1})
	}
	// Only the order's messages are left to project.
	last, err := db.Outbox().LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Outbox().SaveCheckpoint(ctx, projection.Consumer, last); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Orders().Place(ctx, order.Placement{OrderID: "o1", UserID: owner.UserID, CartID: c.ID,
		CartOwner: owner.Key(), Zone: "eu", IdempotencyKey: "k1", Lines: lines, At: now}); err != nil {
		t.Fatal(err)
	}

	sink := &gatedSink{want: len(ids), all: make(chan struct{}), got: map[string]int64{}}
	marker := &failingMarker{CartMarker: db.Carts(), fail: errors.New("node down")}
	p := outbox.NewProjector(db.Outbox(), projection.Consumer, nil)
	projection.Register(p, projection.Targets{Carts: marker, History: db.History(), Catalog: sink, Products: db.Products()})
	if _, err := p.Drain(ctx); !errors.Is(err, marker.fail) {
		t.Fatalf("drain with the cart store down: %v, want %v", err, marker.fail)
	}
	if lag, err := p.Lag(ctx); err != nil || lag != 1 {
		t.Fatalf("lag %d (%v) after the failed mark, want the order's message", lag, err)
	}
	// The history entry was written alongside the failed mark; the retry rewrites it once.
	marker.fail = nil
	sink = &gatedSink{want: len(ids), all: make(chan struct{}), got: map[string]int64{}}
	p = outbox.NewProjector(db.Outbox(), projection.Consumer, nil)
	projection.Register(p, projection.Targets{Carts: marker, History: db.History(), Catalog: sink, Products: db.Products()})
	if _, err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if sink.alone {
		t.Error("a product's refresh waited in vain for the others: the order's products were not refreshed together")
	}
	for _, id := range ids {
		if sink.got[id] != 9 {
			t.Errorf("read model stock of %s: %d, want 9 after the order", id, sink.got[id])
		}
	}
	page, err := db.History().ListHistory(ctx, owner.UserID, paging.Request{Limit: 10})
	if err != nil || len(page.Items) != 1 || page.Items[0].OrderID != "o1" {
		t.Errorf("history %+v (%v), want order o1 once", page.Items, err)
	}
	if _, err := db.Carts().ActiveCart(ctx, owner, time.Now()); !errors.Is(err, cart.ErrNotFound) {
		t.Errorf("active cart after the order: %v, want none (marked ordered)", err)
	}
}
