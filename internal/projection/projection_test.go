package projection_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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

// TestProjectorCrashMidwayConverges places orders on the embedded store, lets the projector die
// in the middle of the outbox, restarts it, and checks the history read model and the carts end
// with every order exactly once: no duplicate, no gap.
func TestProjectorCrashMidwayConverges(t *testing.T) {
	ctx := context.Background()
	db, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := catalog.Product{ID: "p1", Name: "Thing", Category: "things", Price: money.MustParse("2.00"), Stock: map[string]int64{"eu": 1000}}
	if err := db.Products().CreateProduct(ctx, p); err != nil {
		t.Fatal(err)
	}
	const users, perUser = 5, 6
	now := time.Now().UTC().Truncate(time.Millisecond)
	var carts []string
	for u := 0; u < users; u++ {
		for i := 0; i < perUser; i++ {
			owner := cart.User(fmt.Sprintf("u%d", u))
			c, err := db.Carts().PutItem(ctx, owner, cart.Item{ProductID: "p1", Category: "things", Quantity: 1, AddedAt: now}, time.Time{}, now)
			if err != nil {
				t.Fatal(err)
			}
			// Several orders per user need several carts; retire this one by hand so the next
			// PutItem opens a new cart (the projector then marks it with the real order id).
			_, _, err = db.Orders().Place(ctx, order.Placement{OrderID: fmt.Sprintf("o-%d-%d", u, i), UserID: owner.UserID,
				CartID: c.ID, CartOwner: owner.Key(), Zone: "eu", IdempotencyKey: fmt.Sprintf("k%d", i),
				Lines: []order.Line{{ProductID: "p1", Category: "things", Quantity: 1}}, At: now.Add(time.Duration(i) * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Carts().MarkOrdered(ctx, owner, c.ID, "pending", now); err != nil {
				t.Fatal(err)
			}
			carts = append(carts, c.ID)
		}
	}
	// Crash on one chosen order, not on the n-th handler call: the projector applies a batch's
	// keys concurrently, so which message the n-th call sees is not fixed, while the checkpoint
	// after a failed key is: the message just before it.
	const crashKey = "o-2-3"
	errKilled := errors.New("projector killed")
	msgs, err := db.Outbox().ReadOutbox(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var crashSeq int64
	for _, m := range msgs {
		if m.Topic == outbox.TopicOrderPlaced && m.Key == crashKey {
			crashSeq = m.Seq
		}
	}
	last, err := db.Outbox().LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if crashSeq <= 1 || crashSeq >= last {
		t.Fatalf("order %s is at seq %d of %d: want it strictly inside the outbox", crashKey, crashSeq, last)
	}
	crashing := outbox.NewProjector(db.Outbox(), projection.Consumer, nil)
	crashing.Handle(outbox.TopicOrderPlaced, func(ctx context.Context, m outbox.Message) error {
		if m.Key == crashKey {
			return errKilled
		}
		return nil
	})
	projection.Register(crashing, projection.Targets{Carts: db.Carts(), History: db.History()})
	if _, err := crashing.Drain(ctx); !errors.Is(err, errKilled) {
		t.Fatalf("the crashing projector's drain: got %v, want %v", err, errKilled)
	}
	lag, err := crashing.Lag(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Everything before the crashed order is checkpointed, it and everything after are not
	// (even where applied): the restart replays them.
	if want := last - crashSeq + 1; lag != want {
		t.Fatalf("after the crash at seq %d of %d the lag is %d, want %d", crashSeq, last, lag, want)
	}

	restarted := outbox.NewProjector(db.Outbox(), projection.Consumer, nil)
	projection.Register(restarted, projection.Targets{Carts: db.Carts(), History: db.History()})
	if _, err := restarted.Drain(ctx); err != nil {
		t.Fatalf("restarted projector: %v", err)
	}
	if lag, err := restarted.Lag(ctx); err != nil || lag != 0 {
		t.Errorf("lag after restart: %d (%v), want 0", lag, err)
	}
	for u := 0; u < users; u++ {
		page, err := db.History().ListHistory(ctx, fmt.Sprintf("u%d", u), paging.Request{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, e := range page.Items {
			seen[e.OrderID]++
		}
		for i := 0; i < perUser; i++ {
			if id := fmt.Sprintf("o-%d-%d", u, i); seen[id] != 1 {
				t.Errorf("user %d: order %s appears %d times in history, want exactly 1", u, id, seen[id])
			}
		}
		if len(page.Items) != perUser {
			t.Errorf("user %d: %d history entries, want %d", u, len(page.Items), perUser)
		}
	}
}

// TestStatusChangesReachHistory checks the status topic updates the read model in order.
func TestStatusChangesReachHistory(t *testing.T) {
	ctx := context.Background()
	db, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := catalog.Product{ID: "p1", Name: "Thing", Category: "things", Price: money.MustParse("2.00"), Stock: map[string]int64{"eu": 10}}
	if err := db.Products().CreateProduct(ctx, p); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	owner := cart.User("u1")
	c, err := db.Carts().PutItem(ctx, owner, cart.Item{ProductID: "p1", Category: "things", Quantity: 2, AddedAt: now}, time.Time{}, now)
	if err != nil {
		t.Fatal(err)
	}
	proj := outbox.NewProjector(db.Outbox(), projection.Consumer, nil)
	projection.Register(proj, projection.Targets{Carts: db.Carts(), History: db.History()})
	svc := &order.Service{Orders: db.Orders(), Carts: &cart.Service{Carts: db.Carts(), Orders: db.Orders(), Now: time.Now}, FollowUps: projection.Inline{P: proj}, Now: time.Now}
	o, created, err := svc.PlaceFromCart(ctx, "u1", "eu", "key-1")
	if err != nil || !created || o.CartID != c.ID {
		t.Fatalf("place: %v created=%v cart=%s", err, created, o.CartID)
	}
	if _, err := db.Carts().ActiveCart(ctx, owner, time.Now()); !errors.Is(err, cart.ErrNotFound) {
		t.Errorf("cart still active after the order's follow-ups: %v", err)
	}
	if _, err := svc.Transition(ctx, o.ID, order.Paid); err != nil {
		t.Fatal(err)
	}
	page, err := db.History().ListHistory(ctx, "u1", paging.Request{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 || page.Items[0].Status != order.Paid || page.Items[0].Total != money.MustParse("4.00") {
		t.Errorf("history: %+v, want one paid order of 4.00", page.Items)
	}
	again, created, err := svc.PlaceFromCart(ctx, "u1", "eu", "key-1")
	if err != nil || created || again.ID != o.ID {
		t.Errorf("replay: %v created=%v id=%s, want the first order", err, created, again.ID)
	}
	if _, _, err := svc.PlaceFromCart(ctx, "u1", "us", "key-1"); !errors.Is(err, order.ErrKeyReused) {
		t.Errorf("same key, other zone: got %v, want ErrKeyReused", err)
	}
	if _, _, err := svc.PlaceFromCart(ctx, "u1", "eu", "key-2"); !errors.Is(err, order.ErrEmptyCart) {
		t.Errorf("order with no cart: got %v, want ErrEmptyCart", err)
	}
}
