package faulttest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/serverproc"
)

// orderState is what a status change touches: the order's status and the stock of the
// products it holds.
type orderState struct {
	status string
	stock  map[string]int64
}

func readOrderState(ctx context.Context, db string, o order.Order) (orderState, error) {
	var st orderState
	err := retry(ctx, "read order", func(ctx context.Context) error {
		var raw rawOrder
		if err := checker.Database(db).Collection("orders").FindOne(ctx,
			bson.D{{Key: "user_id", Value: o.UserID}, {Key: "_id", Value: o.ID}}).Decode(&raw); err != nil {
			return err
		}
		ids := bson.A{}
		for _, it := range o.Items {
			ids = append(ids, it.ProductID)
		}
		cur, err := checker.Database(db).Collection("products").Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
		if err != nil {
			return err
		}
		var ps []rawProduct
		if err := cur.All(ctx, &ps); err != nil {
			return err
		}
		st = orderState{status: raw.Status, stock: map[string]int64{}}
		for _, p := range ps {
			st.stock[p.ID] = p.Stock[zone]
		}
		return nil
	})
	return st, err
}

// settledState re-reads o's state until want accepts it, for at most settleWithin. The order
// and its products are two reads, each at majority on the primary of its moment: across a
// step-down the second can land on a new primary whose majority snapshot has not yet caught up
// with the old one's (it advances once the new term commits an entry), so one pair of reads can
// mix a newer order with older stock, or miss a change the old primary acknowledged. A change
// that is committed at majority shows in every later snapshot; what stays wrong past the
// bound is a real defect.
func settledState(ctx context.Context, db string, o order.Order, want func(orderState) bool) (orderState, error) {
	const settleWithin = 10 * time.Second
	deadline := time.Now().Add(settleWithin)
	for {
		st, err := readOrderState(ctx, db, o)
		if err != nil || want(st) || time.Now().After(deadline) {
			return st, err
		}
		if err := serverproc.Sleep(ctx, 100*time.Millisecond); err != nil {
			return st, err
		}
	}
}

// transitionTo is a caller that retries a status change until it is done: nil, or
// ErrIllegalTransition because an earlier attempt whose answer was lost did it already.
func transitionTo(ctx context.Context, orders order.Repository, id string, to order.Status) error {
	return retry(ctx, "transition to "+string(to), func(ctx context.Context) error {
		_, err := orders.Transition(ctx, id, to, time.Now())
		if errors.Is(err, order.ErrIllegalTransition) {
			o, gerr := orders.GetOrder(ctx, id)
			if gerr == nil && o.Status == to {
				return nil
			}
		}
		return err
	})
}

// TestOrderStatusChangeUnderStepDownAppliesOnceOrNotAtAll: workers place orders and change
// their status (ORD-3, order.Repository.Transition: created → paid, created → cancelled,
// paid → cancelled; a cancel restocks) over and over while the primary is stepped down, round
// after round. Each change either returns nil having happened once (status changed, a cancel
// put each line's units back exactly once) or returns an error having changed nothing; a
// caller's retry after an error applies it once, and a retry after success (a lost answer) is
// refused as an illegal transition and changes nothing. At the end every product's stock plus
// the units of its orders not cancelled is its initial stock, and every order has exactly one
// order.placed and one order.status_changed outbox row per status change it went through.
// Each worker has its own products, so a try's stock change is its own.
func TestOrderStatusChangeUnderStepDownAppliesOnceOrNotAtAll(t *testing.T) {
	ctx := start(t)
	s, db := openStore(t, ctx, "status")
	orders := s.Orders()
	svc := &order.Service{Orders: orders, Carts: &cart.Service{Carts: s.Carts(), Orders: orders, Now: time.Now}, Now: time.Now}
	const (
		rounds       = 16
		workers      = 4
		maxTries     = 40
		initialStock = 100000
	)
	var products [workers][]catalog.Product
	for w := range workers {
		products[w] = createProducts(t, ctx, s, fmt.Sprintf("tp%d", w), 2, initialStock)
	}
	type kind struct{ from, to order.Status }
	kinds := []kind{{order.Created, order.Paid}, {order.Created, order.Cancelled}, {order.Paid, order.Cancelled}}
	var (
		tl     = &tally{}
		mu     sync.Mutex
		placed = map[string]kind{} // order id → the change it went through
	)
	stats := &roundStats{}
	try := func(ctx context.Context, w, round, i int) {
		k := kinds[(round+w+i)%len(kinds)]
		user, key := fmt.Sprintf("tu-%d-%d-%d", round, w, i), fmt.Sprintf("tk-%d-%d-%d", round, w, i)
		lines := map[string]int64{products[w][0].ID: int64(1 + i%3)}
		if i%2 == 0 {
			lines[products[w][1].ID] = 2
		}
		for id, q := range lines {
			if err := retry(ctx, "fill cart", func(ctx context.Context) error {
				_, err := s.Carts().PutItem(ctx, cart.User(user), cart.Item{ProductID: id, Category: "faulttest", Quantity: q, AddedAt: time.Now()}, time.Time{}, time.Now())
				return err
			}); err != nil {
				tl.fail("%s: setup: %v", user, err)
				return
			}
		}
		var o order.Order
		if err := retry(ctx, "place", func(ctx context.Context) error {
			var err error
			o, _, err = svc.PlaceFromCart(ctx, user, zone, key)
			return err
		}); err != nil {
			tl.fail("%s: setup: %v", user, err)
			return
		}
		if k.from == order.Paid {
			if err := transitionTo(ctx, orders, o.ID, order.Paid); err != nil {
				tl.fail("%s: setup: %v", o.ID, err)
				return
			}
		}
		mu.Lock()
		placed[o.ID] = kind{from: order.Created, to: order.Created} // until the change below is known to be done
		mu.Unlock()
		before, err := readOrderState(ctx, db, o)
		if err != nil || before.status != string(k.from) {
			tl.fail("%s: setup not visible at majority: %+v, %v", o.ID, before, err)
			return
		}
		restock := map[string]int64{}
		for id, q := range lines {
			restock[id] = before.stock[id]
			if k.to == order.Cancelled {
				restock[id] += q
			}
		}
		done := func(st orderState) bool { return st.status == string(k.to) && maps.Equal(st.stock, restock) }
		untouched := func(st orderState) bool { return st.status == before.status && maps.Equal(st.stock, before.stock) }

		tl.tried.Add(1)
		tctx, cancel := context.WithTimeout(ctx, budget(i))
		began := time.Now()
		_, err = orders.Transition(tctx, o.ID, k.to, time.Now())
		ended := time.Now()
		cancel()
		if stats.inFlight(began, ended) {
			tl.inFlight.Add(1)
		}
		if ended.Sub(began) > 300*time.Millisecond {
			tl.slow.Add(1)
		}
		after, rerr := settledState(ctx, db, o, func(st orderState) bool { return done(st) || err != nil && untouched(st) })
		if rerr != nil {
			tl.fail("%s: %v", o.ID, rerr)
			return
		}
		switch {
		case err == nil && done(after):
			tl.applied.Add(1)
		case err == nil:
			tl.fail("%s %s→%s returned nil, but status %s, stock %v (before %v, want %v)", o.ID, k.from, k.to, after.status, after.stock, before.stock, restock)
			return
		case untouched(after):
			tl.cleanFail.Add(1)
			tl.errKinds.add(err)
		case done(after):
			tl.fail("%s %s→%s returned %v but it was applied", o.ID, k.from, k.to, err)
			tl.errKinds.add(err)
		default:
			tl.fail("%s %s→%s returned %v and left status %s, stock %v (before %v, want %v or nothing)", o.ID, k.from, k.to, err, after.status, after.stock, before.stock, restock)
			return
		}
		if err != nil { // the caller retries until it is done
			if err := transitionTo(ctx, orders, o.ID, k.to); err != nil {
				tl.fail("%s: retried transition: %v", o.ID, err)
				return
			}
			if after, err = readOrderState(ctx, db, o); err != nil || !done(after) {
				tl.fail("%s %s→%s after an error and a retry: status %s, stock %v (before %v, want %v), %v", o.ID, k.from, k.to, after.status, after.stock, before.stock, restock, err)
				return
			}
			tl.retriedOK.Add(1)
		}
		// The caller whose answer was lost retries once more: refused, nothing changes.
		err = retry(ctx, "repeat transition", func(ctx context.Context) error {
			_, err := orders.Transition(ctx, o.ID, k.to, time.Now())
			if errors.Is(err, order.ErrIllegalTransition) {
				return nil
			}
			if err == nil {
				return errors.New("applied twice")
			}
			return err
		})
		if again, rerr := readOrderState(ctx, db, o); err != nil || rerr != nil || !done(again) {
			tl.fail("%s %s→%s repeated: %v; status %s, stock %v (want %v), %v", o.ID, k.from, k.to, err, again.status, again.stock, restock, rerr)
			return
		}
		mu.Lock()
		placed[o.ID] = k
		mu.Unlock()
	}
	began := time.Now()
	underStepDowns(t, ctx, db, rounds, workers, maxTries, stats, try)
	t.Logf("%s, in %s", stats, time.Since(began).Round(100*time.Millisecond))
	t.Logf("status changes: %d tried, %d in flight during a step-down, %d took over 300 ms; %d happened once and returned nil, %d failed cleanly (nothing changed) and were then applied once by a retry (%d); errors: %s",
		tl.tried.Load(), tl.inFlight.Load(), tl.slow.Load(), tl.applied.Load(), tl.cleanFail.Load(), tl.retriedOK.Load(), &tl.errKinds)
	tl.check(t, stats, rounds, "status change")
	if len(tl.bad) > 0 {
		return // the totals below would only repeat the failures
	}

	// Totals over everything the test stored, read at majority.
	stored, err := allOrders(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int64{}
	for _, o := range stored {
		k, ok := placed[o.ID]
		if !ok {
			t.Errorf("order %s stored but no try placed it", o.ID)
			continue
		}
		if o.Status != string(k.to) {
			t.Errorf("order %s is %s, want %s", o.ID, o.Status, k.to)
		}
		if o.Status != string(order.Cancelled) {
			for _, it := range o.Items {
				held[it.ProductID] += it.Quantity
			}
		}
	}
	stock, err := stockOf(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for w := range products {
		for _, p := range products[w] {
			if stock[p.ID]+held[p.ID] != initialStock {
				t.Errorf("product %s: stock %d + %d units in orders not cancelled = %d, want %d", p.ID, stock[p.ID], held[p.ID], stock[p.ID]+held[p.ID], initialStock)
			}
		}
	}
	ob, total, err := outboxByKey(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	changes := 0
	for id, k := range placed {
		want := 0
		switch {
		case k.to == order.Created: // its try failed before the change
		case k.from == order.Paid:
			want = 2 // created → paid → cancelled
		default:
			want = 1
		}
		changes += want
		if n := ob[outbox.TopicOrderPlaced][id]; n != 1 {
			t.Errorf("order %s: %d order.placed rows, want 1", id, n)
		}
		if n := ob[outbox.TopicOrderStatus][id]; n != want {
			t.Errorf("order %s (%s → %s): %d order.status_changed rows, want %d", id, k.from, k.to, n, want)
		}
	}
	t.Logf("totals: %d orders, %d status changes, %d outbox rows; stock + units held = initial for all %d products",
		len(stored), changes, total, workers*2)
}
