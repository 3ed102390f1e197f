package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
)

// OrderStore is the transactional store: orders, the products whose stock they take, and the
// outbox they write, all in one backend.
type OrderStore struct {
	Orders   order.Repository
	Products catalog.Repository
	Outbox   outbox.Log
}

func placement(user, zone string, lines ...order.Line) order.Placement {
	return order.Placement{OrderID: uid("o"), UserID: user, CartID: uid("cart"), CartOwner: cart.User(user).Key(),
		Zone: zone, IdempotencyKey: uid("k"), Lines: lines, At: base}
}

func line(p catalog.Product, qty int64) order.Line {
	return order.Line{ProductID: p.ID, Category: p.Category, Quantity: qty}
}

// messagesFor returns the outbox messages keyed by key, in outbox order: a key's messages
// all sit in one partition of a partitioned outbox.
func messagesFor(t *testing.T, log outbox.Log, key string) []outbox.Message {
	t.Helper()
	var out []outbox.Message
	for _, part := range outbox.Parts(log) {
		out = append(out, partMessagesFor(t, part, key)...)
	}
	return out
}

func partMessagesFor(t *testing.T, log outbox.Log, key string) []outbox.Message {
	t.Helper()
	var out []outbox.Message
	after := int64(0)
	for {
		msgs, err := log.ReadOutbox(context.Background(), after, 500)
		if err != nil {
			t.Fatalf("read outbox: %v", err)
		}
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			if m.Seq <= after {
				t.Fatalf("outbox seq %d after %d: not strictly increasing", m.Seq, after)
			}
			after = m.Seq
			if m.Key == key {
				out = append(out, m)
			}
		}
	}
}

// Orders is the order contract (ORD-1, ORD-3) including the no-oversell race.
func Orders(t *testing.T, newStore func(t *testing.T) OrderStore) {
	t.Run("ORD-1 PRD-4 place prices from catalog, takes stock, writes outbox", func(t *testing.T) { ordersPlace(t, newStore) })
	t.Run("ORD-1 idempotency key returns the first order", func(t *testing.T) { ordersIdempotencyKey(t, newStore) })
	t.Run("ORD-1 concurrent retries with one key create one order", func(t *testing.T) { ordersConcurrentRetries(t, newStore) })
	t.Run("ORD-1 CRT-6 one cart orders once", func(t *testing.T) { ordersOneCartOrdersOnce(t, newStore) })
	t.Run("ORD-1 short item refuses the whole order and writes nothing", func(t *testing.T) { ordersShortItemRefused(t, newStore) })
	t.Run("ORD-1 concurrent orders for the last units never oversell", func(t *testing.T) { ordersNeverOversell(t, newStore) })
	t.Run("ORD-3 status machine, cancel restocks", func(t *testing.T) { ordersStatusMachine(t, newStore) })
	t.Run("outbox checkpoints", func(t *testing.T) { ordersOutboxCheckpoints(t, newStore) })
}

func ordersPlace(t *testing.T, newStore func(t *testing.T) OrderStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	a := newProduct(slug("c"), "10.00", map[string]int64{"eu": 5})
	b := newProduct(slug("c"), "2.50", map[string]int64{"eu": 5, "us": 9})
	mustCreate(t, s.Products, a)
	mustCreate(t, s.Products, b)
	pl := placement(uid("u"), "eu", line(a, 2), line(b, 3))
	o, created, err := s.Orders.Place(ctx, pl)
	if err != nil || !created {
		t.Fatalf("place: created=%v err=%v", created, err)
	}
	if o.ID != pl.OrderID || o.Status != order.Created || o.Total != money.MustParse("27.50") || len(o.Items) != 2 {
		t.Errorf("order: got id %s status %s total %s items %d; want %s created 27.50 2", o.ID, o.Status, o.Total, len(o.Items), pl.OrderID)
	}
	for _, it := range o.Items {
		want := map[string]money.Amount{a.ID: a.Price, b.ID: b.Price}[it.ProductID]
		if it.UnitPrice != want || it.Name == "" || it.Category == "" {
			t.Errorf("item %s: unit price %s name %q category %q, want price %s and catalog name/category", it.ProductID, it.UnitPrice, it.Name, it.Category, want)
		}
	}
	got, err := s.Orders.GetOrder(ctx, o.ID)
	if err != nil || got.Total != o.Total || got.UserID != pl.UserID || got.CartID != pl.CartID || got.Zone != "eu" {
		t.Errorf("get: %+v, %v", got, err)
	}
	sameInstant(t, "created_at", got.CreatedAt, base)
	pa, _ := s.Products.GetProduct(ctx, a.ID)
	pb, _ := s.Products.GetProduct(ctx, b.ID)
	if pa.Stock["eu"] != 3 || pb.Stock["eu"] != 2 || pb.Stock["us"] != 9 {
		t.Errorf("stock after order: a.eu=%d b.eu=%d b.us=%d, want 3 2 9", pa.Stock["eu"], pb.Stock["eu"], pb.Stock["us"])
	}
	msgs := messagesFor(t, s.Outbox, o.ID)
	if len(msgs) != 1 || msgs[0].Topic != outbox.TopicOrderPlaced {
		t.Fatalf("outbox for order: got %d messages %v, want one %s", len(msgs), msgs, outbox.TopicOrderPlaced)
	}
	var payload order.Order
	if err := json.Unmarshal(msgs[0].Payload, &payload); err != nil || payload.ID != o.ID || payload.CartID != pl.CartID || payload.Total != o.Total {
		t.Errorf("outbox payload: %+v, %v", payload, err)
	}
	if last, err := s.Outbox.LastSeq(ctx); err != nil || last < msgs[0].Seq {
		t.Errorf("last seq %d (%v) below message seq %d", last, err, msgs[0].Seq)
	}
}

func ordersIdempotencyKey(t *testing.T, newStore func(t *testing.T) OrderStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	p := newProduct(slug("c"), "3.00", map[string]int64{"eu": 10})
	mustCreate(t, s.Products, p)
	first := placement(uid("u"), "eu", line(p, 1))
	o1, created, err := s.Orders.Place(ctx, first)
	if err != nil || !created {
		t.Fatalf("first place: %v", err)
	}
	retry := first
	retry.OrderID = uid("o")
	retry.CartID = uid("cart")
	o2, created, err := s.Orders.Place(ctx, retry)
	if err != nil || created || o2.ID != o1.ID {
		t.Errorf("retry: got order %s created=%v err=%v, want %s created=false", o2.ID, created, err, o1.ID)
	}
	byKey, err := s.Orders.ByIdempotencyKey(ctx, first.UserID, first.IdempotencyKey)
	if err != nil || byKey.ID != o1.ID {
		t.Errorf("by key: %s, %v", byKey.ID, err)
	}
	if _, err := s.Orders.ByIdempotencyKey(ctx, uid("u"), first.IdempotencyKey); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("same key, other user: got %v, want ErrNotFound (keys are per user)", err)
	}
	got, _ := s.Products.GetProduct(ctx, p.ID)
	if got.Stock["eu"] != 9 {
		t.Errorf("stock after a retried order: got %d, want 9", got.Stock["eu"])
	}
}

func ordersConcurrentRetries(t *testing.T, newStore func(t *testing.T) OrderStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	p := newProduct(slug("c"), "3.00", map[string]int64{"eu": 100})
	mustCreate(t, s.Products, p)
	pl := placement(uid("u"), "eu", line(p, 1))
	ids := make(chan string, 10)
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			try := pl
			try.OrderID = uid("o")
			o, _, err := s.Orders.Place(ctx, try)
			if err != nil {
				t.Errorf("place: %v", err)
				return
			}
			ids <- o.ID
		}()
	}
	wg.Wait()
	close(ids)
	distinct := map[string]bool{}
	for id := range ids {
		distinct[id] = true
	}
	got, _ := s.Products.GetProduct(ctx, p.ID)
	if len(distinct) != 1 || got.Stock["eu"] != 99 {
		t.Errorf("got %d distinct orders and stock %d, want 1 and 99", len(distinct), got.Stock["eu"])
	}
}

func ordersOneCartOrdersOnce(t *testing.T, newStore func(t *testing.T) OrderStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	p := newProduct(slug("c"), "3.00", map[string]int64{"eu": 10})
	mustCreate(t, s.Products, p)
	pl := placement(uid("u"), "eu", line(p, 1))
	if _, _, err := s.Orders.Place(ctx, pl); err != nil {
		t.Fatal(err)
	}
	again := pl
	again.OrderID, again.IdempotencyKey = uid("o"), uid("k")
	if _, _, err := s.Orders.Place(ctx, again); !errors.Is(err, order.ErrCartAlreadyOrdered) {
		t.Errorf("second order from one cart: got %v, want ErrCartAlreadyOrdered", err)
	}
}

func ordersShortItemRefused(t *testing.T, newStore func(t *testing.T) OrderStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	plenty := newProduct(slug("c"), "1.00", map[string]int64{"eu": 10})
	few := newProduct(slug("c"), "1.00", map[string]int64{"eu": 1, "us": 50})
	mustCreate(t, s.Products, plenty)
	mustCreate(t, s.Products, few)
	pl := placement(uid("u"), "eu", line(plenty, 4), line(few, 2))
	_, _, err := s.Orders.Place(ctx, pl)
	var short *catalog.InsufficientStockError
	if !errors.As(err, &short) || short.ProductID != few.ID || short.Requested != 2 || short.Available != 1 || short.Zone != "eu" {
		t.Fatalf("got %v, want InsufficientStockError for %s (requested 2, available 1 in eu)", err, few.ID)
	}
	if _, err := s.Orders.GetOrder(ctx, pl.OrderID); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("refused order is readable: %v", err)
	}
	if _, err := s.Orders.ByIdempotencyKey(ctx, pl.UserID, pl.IdempotencyKey); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("refused order holds its idempotency key: %v", err)
	}
	p1, _ := s.Products.GetProduct(ctx, plenty.ID)
	if p1.Stock["eu"] != 10 {
		t.Errorf("stock of the plentiful item: got %d, want 10 (rolled back)", p1.Stock["eu"])
	}
	if msgs := messagesFor(t, s.Outbox, pl.OrderID); len(msgs) != 0 {
		t.Errorf("refused order wrote %d outbox messages", len(msgs))
	}
	missing := placement(uid("u"), "eu", line(plenty, 1), order.Line{ProductID: uid("gone"), Category: plenty.Category, Quantity: 1})
	if _, _, err := s.Orders.Place(ctx, missing); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("unknown product: got %v, want catalog.ErrNotFound", err)
	}
	if p1, _ := s.Products.GetProduct(ctx, plenty.ID); p1.Stock["eu"] != 10 {
		t.Errorf("stock after unknown-product order: got %d, want 10", p1.Stock["eu"])
	}
}

func ordersNeverOversell(t *testing.T, newStore func(t *testing.T) OrderStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	const stock, buyers = 7, 30
	p := newProduct(slug("c"), "5.00", map[string]int64{"eu": stock})
	filler := newProduct(slug("c"), "1.00", map[string]int64{"eu": 1000})
	mustCreate(t, s.Products, p)
	mustCreate(t, s.Products, filler)
	var wg sync.WaitGroup
	var mu sync.Mutex
	sold, refused := 0, 0
	for i := 0; i < buyers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := s.Orders.Place(ctx, placement(uid("u"), "eu", line(filler, 1), line(p, 1)))
			mu.Lock()
			defer mu.Unlock()
			var short *catalog.InsufficientStockError
			switch {
			case err == nil:
				sold++
			case errors.As(err, &short) && short.ProductID == p.ID:
				refused++
			default:
				t.Errorf("unexpected: %v", err)
			}
		}()
	}
	wg.Wait()
	got, _ := s.Products.GetProduct(ctx, p.ID)
	fill, _ := s.Products.GetProduct(ctx, filler.ID)
	if sold != stock || refused != buyers-stock || got.Stock["eu"] != 0 || fill.Stock["eu"] != 1000-stock {
		t.Errorf("sold %d refused %d left %d filler left %d; want %d %d 0 %d", sold, refused, got.Stock["eu"], fill.Stock["eu"], stock, buyers-stock, 1000-stock)
	}
}

func ordersStatusMachine(t *testing.T, newStore func(t *testing.T) OrderStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	p := newProduct(slug("c"), "4.00", map[string]int64{"eu": 5})
	mustCreate(t, s.Products, p)
	o, _, err := s.Orders.Place(ctx, placement(uid("u"), "eu", line(p, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Orders.Transition(ctx, o.ID, order.Shipped, base); !errors.Is(err, order.ErrIllegalTransition) {
		t.Errorf("created -> shipped: got %v, want ErrIllegalTransition", err)
	}
	later := base.Add(time.Minute)
	paid, err := s.Orders.Transition(ctx, o.ID, order.Paid, later)
	if err != nil || paid.Status != order.Paid {
		t.Fatalf("created -> paid: %v %v", paid.Status, err)
	}
	sameInstant(t, "updated_at", paid.UpdatedAt, later)
	cancelled, err := s.Orders.Transition(ctx, o.ID, order.Cancelled, later)
	if err != nil || cancelled.Status != order.Cancelled {
		t.Fatalf("paid -> cancelled: %v %v", cancelled.Status, err)
	}
	if got, _ := s.Products.GetProduct(ctx, p.ID); got.Stock["eu"] != 5 {
		t.Errorf("stock after cancel: got %d, want 5 (returned)", got.Stock["eu"])
	}
	if _, err := s.Orders.Transition(ctx, o.ID, order.Paid, later); !errors.Is(err, order.ErrIllegalTransition) {
		t.Errorf("cancelled -> paid: got %v, want ErrIllegalTransition", err)
	}
	if got, _ := s.Products.GetProduct(ctx, p.ID); got.Stock["eu"] != 5 {
		t.Errorf("stock after refused transition: got %d, want 5", got.Stock["eu"])
	}
	msgs := messagesFor(t, s.Outbox, o.ID)
	topics := ""
	for _, m := range msgs {
		topics += m.Topic + " "
	}
	if want := fmt.Sprintf("%s %s %s ", outbox.TopicOrderPlaced, outbox.TopicOrderStatus, outbox.TopicOrderStatus); topics != want {
		t.Errorf("outbox topics: got %q, want %q", topics, want)
	}
	if _, err := s.Orders.Transition(ctx, uid("missing"), order.Paid, later); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("transition missing: got %v, want ErrNotFound", err)
	}
	shipped := placement(uid("u"), "eu", line(p, 1))
	o2, _, _ := s.Orders.Place(ctx, shipped)
	for _, st := range []order.Status{order.Paid, order.Shipped} {
		if _, err := s.Orders.Transition(ctx, o2.ID, st, later); err != nil {
			t.Fatalf("-> %s: %v", st, err)
		}
	}
	if _, err := s.Orders.Transition(ctx, o2.ID, order.Cancelled, later); !errors.Is(err, order.ErrIllegalTransition) {
		t.Errorf("shipped -> cancelled: got %v, want ErrIllegalTransition", err)
	}
	if d, err := s.Orders.Transition(ctx, o2.ID, order.Delivered, later); err != nil || d.Status != order.Delivered {
		t.Errorf("shipped -> delivered: %v %v", d.Status, err)
	}
}

func ordersOutboxCheckpoints(t *testing.T, newStore func(t *testing.T) OrderStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	consumer := uid("consumer")
	parts := outbox.Parts(s.Outbox)
	for i, part := range parts {
		if cp, err := part.Checkpoint(ctx, consumer); err != nil || cp != 0 {
			t.Fatalf("partition %d: new consumer checkpoint: got %d, %v; want 0", i, cp, err)
		}
	}
	if err := parts[0].SaveCheckpoint(ctx, consumer, 42); err != nil {
		t.Fatal(err)
	}
	for i, part := range parts {
		want := int64(0) // partitions keep their own checkpoints
		if i == 0 {
			want = 42
		}
		if cp, err := part.Checkpoint(ctx, consumer); err != nil || cp != want {
			t.Errorf("partition %d: checkpoint: got %d, %v; want %d", i, cp, err, want)
		}
	}
	// Never backwards: a slower drain (another process) saving an older position later
	// leaves the furthest one.
	if err := parts[0].SaveCheckpoint(ctx, consumer, 40); err != nil {
		t.Fatal(err)
	}
	if cp, err := parts[0].Checkpoint(ctx, consumer); err != nil || cp != 42 {
		t.Errorf("checkpoint after saving 40 over 42: got %d, %v; want 42", cp, err)
	}
	if err := parts[0].SaveCheckpoint(ctx, consumer, 43); err != nil {
		t.Fatal(err)
	}
	if cp, err := parts[0].Checkpoint(ctx, consumer); err != nil || cp != 43 {
		t.Errorf("checkpoint after saving 43: got %d, %v; want 43", cp, err)
	}
}
