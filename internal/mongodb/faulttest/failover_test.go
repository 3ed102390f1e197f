package faulttest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/serverproc"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
)

// purchase is one buyer's order-to-be: a user with a cart ready, and the Idempotency-Key the
// client sends on every attempt.
type purchase struct {
	user, key string
	lines     map[string]int64 // product id → quantity in the cart
}

type ack struct {
	purchase
	order    order.Order
	created  bool
	at       time.Time
	attempts int
}

// TestAcknowledgedOrdersSurvivePrimarySIGKILLAndKeyRetriesNeverDouble: 8 buyers place ~300
// orders through order.Service.PlaceFromCart (what POST /v1/orders runs), each with its own
// Idempotency-Key, and the primary is SIGKILLed after the 100th acknowledgement. A client
// gives each request 2 s, hangs up, and retries with the same key until it is acknowledged,
// while the abandoned request may still be finishing on the server. After the election and the
// killed member's return (and its rollback, if any), read from the primary at majority: every
// acknowledged order is there with its items, each key, user and cart has exactly one order,
// stock + units in stored orders = initial stock for every product, and the outbox has exactly
// one order.placed row per stored order and none for any other.
func TestAcknowledgedOrdersSurvivePrimarySIGKILLAndKeyRetriesNeverDouble(t *testing.T) {
	ctx := start(t)
	s, db := openStore(t, ctx, "kill")
	const (
		buyers       = 8
		perBuyer     = 38 // 304 orders
		killAfter    = 100
		initialStock = 5000
		// A client gives a request 2 s (an HTTP client's timeout), shorter than the
		// election, then retries with the same key.
		clientTimeout = 2 * time.Second
	)
	products := createProducts(t, ctx, s, "kp", 5, initialStock)
	byID := map[string]catalog.Product{}
	for _, p := range products {
		byID[p.ID] = p
	}

	// Carts are filled before the burst: the burst is order placement alone.
	rng := rand.New(rand.NewPCG(1, 2))
	plans := make([][]purchase, buyers)
	for b := range plans {
		for i := range perBuyer {
			p := purchase{user: fmt.Sprintf("kill-u-%d-%d", b, i), key: fmt.Sprintf("kill-key-%d-%d", b, i), lines: map[string]int64{}}
			for range 1 + rng.IntN(3) {
				p.lines[products[rng.IntN(len(products))].ID] = int64(1 + rng.IntN(3))
			}
			plans[b] = append(plans[b], p)
		}
	}
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, buyers)
	for b := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, p := range plans[b] {
				for id, q := range p.lines {
					err := retry(ctx, "fill cart", func(ctx context.Context) error {
						_, err := s.Carts().PutItem(ctx, cart.User(p.user),
							cart.Item{ProductID: id, Category: byID[id].Category, Quantity: q, AddedAt: time.Now()}, time.Time{}, time.Now())
						return err
					})
					if err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d carts filled in %s", buyers*perBuyer, time.Since(began).Round(10*time.Millisecond))

	svc := &order.Service{Orders: s.Orders(), Carts: &cart.Service{Carts: s.Carts(), Orders: s.Orders(), Now: time.Now}, Now: time.Now}
	var (
		mu       sync.Mutex
		acks     []ack
		gaveUp   []purchase
		refused  []string
		errKinds counter
		nAcked   atomic.Int64
		failures atomic.Int64

		victim                                     = -1 // the primary when the kill comes: member 0 after start()
		killOnce                                   sync.Once
		killed                                     = make(chan struct{})
		killAt, electedAt, writableAt, restartedAt time.Time
		newPrimary                                 = -1
		killErr                                    error
	)
	kill := func() {
		defer close(killed)
		if victim = set.Primary(ctx); victim < 0 {
			killErr = errors.New("no primary to kill")
			return
		}
		killAt = time.Now()
		if killErr = set.Kill(ctx, victim); killErr != nil {
			return
		}
		for newPrimary = set.Primary(ctx); newPrimary < 0 && ctx.Err() == nil; newPrimary = set.Primary(ctx) {
			_ = serverproc.Sleep(ctx, 20*time.Millisecond)
		}
		electedAt = time.Now()
		if _, killErr = waitWritable(ctx, db); killErr != nil {
			return
		}
		writableAt = time.Now()
		killErr = set.StartMember(ctx, victim) // back as a secondary; member 0 (priority 2) takes the primary back later
		restartedAt = time.Now()
	}

	// request is one POST /v1/orders as the client sees it: the server runs PlaceFromCart with
	// a context cancelled when the client hangs up (as net/http cancels r.Context()), and the
	// client hangs up after clientTimeout. An abandoned request may still commit (the driver
	// finishes a commit it has sent): its late outcome is recorded, and the client's retry with
	// the same key runs concurrently with it.
	type result struct {
		o       order.Order
		created bool
		err     error
	}
	var (
		lateWG                sync.WaitGroup
		abandoned, lateOrders atomic.Int64
		lateCreated           sync.Map // order id → key, orders created by abandoned requests
	)
	request := func(p purchase) (order.Order, bool, error) {
		done := make(chan result, 1)
		rctx, cancel := context.WithTimeout(ctx, clientTimeout)
		go func() {
			defer cancel()
			o, created, err := svc.PlaceFromCart(rctx, p.user, zone, p.key)
			done <- result{o, created, err}
		}()
		timer := time.NewTimer(clientTimeout + 20*time.Millisecond)
		defer timer.Stop()
		select {
		case r := <-done:
			return r.o, r.created, r.err
		case <-timer.C:
		}
		abandoned.Add(1)
		lateWG.Add(1)
		go func() {
			defer lateWG.Done()
			if r := <-done; r.err == nil && r.created {
				lateOrders.Add(1)
				lateCreated.Store(r.o.ID, p.key)
			}
		}()
		return order.Order{}, false, fmt.Errorf("client gave up after %s", clientTimeout)
	}

	burst := time.Now()
	for b := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, p := range plans[b] {
				deadline := time.Now().Add(90 * time.Second)
				for attempt := 1; ; attempt++ {
					o, created, err := request(p)
					if err == nil {
						mu.Lock()
						acks = append(acks, ack{purchase: p, order: o, created: created, at: time.Now(), attempts: attempt})
						mu.Unlock()
						if nAcked.Add(1) == killAfter {
							killOnce.Do(func() { go kill() })
						}
						break
					}
					failures.Add(1)
					errKinds.add(err)
					var short *catalog.InsufficientStockError
					if errors.Is(err, order.ErrCartAlreadyOrdered) || errors.Is(err, order.ErrEmptyCart) ||
						errors.Is(err, order.ErrKeyReused) || errors.As(err, &short) {
						// A retry refused because its first attempt did something: a double
						// apply the key should have answered.
						mu.Lock()
						refused = append(refused, fmt.Sprintf("%s attempt %d: %v", p.key, attempt, err))
						mu.Unlock()
						break
					}
					if time.Now().After(deadline) || ctx.Err() != nil {
						mu.Lock()
						gaveUp = append(gaveUp, p)
						mu.Unlock()
						break
					}
					_ = serverproc.Sleep(ctx, 100*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	burstTook := time.Since(burst)
	lateWG.Wait() // every abandoned request has finished on the server
	select {
	case <-killed:
	case <-ctx.Done():
		t.Fatalf("the primary was never killed (%d acknowledged)", nAcked.Load())
	}
	if killErr != nil {
		t.Fatal(killErr)
	}
	var before, during, after, replayed, retried int
	for _, a := range acks {
		switch {
		case a.at.Before(killAt):
			before++
		case a.at.Before(writableAt):
			during++
		default:
			after++
		}
		if !a.created {
			replayed++
		}
		if a.attempts > 1 {
			retried++
		}
	}
	t.Logf("burst: %d orders acknowledged of %d in %s (%d before the kill, %d between the kill and the new primary's first write, %d after); %d needed a client retry, %d answered as a replay of their key; %d failed attempts: %s",
		len(acks), buyers*perBuyer, burstTook.Round(10*time.Millisecond), before, during, after, retried, replayed, failures.Load(), &errKinds)
	if failures.Load() > 0 {
		t.Logf("one error of each kind:%s", errKinds.examples())
	}
	t.Logf("SIGKILL of member %d (primary) at +%s: member %d PRIMARY after %s, first majority write acknowledged after %s; member %d restarted after %s",
		victim, killAt.Sub(burst).Round(10*time.Millisecond), newPrimary, electedAt.Sub(killAt).Round(10*time.Millisecond),
		writableAt.Sub(killAt).Round(10*time.Millisecond), victim, restartedAt.Sub(killAt).Round(10*time.Millisecond))
	ackByKey := map[string]ack{}
	for _, a := range acks {
		ackByKey[a.key] = a
	}
	lateCreated.Range(func(id, key any) bool {
		// An order an abandoned request created: the client's retry must have been answered
		// with that same order, as a replay.
		if a, ok := ackByKey[key.(string)]; ok && (a.order.ID != id || a.created) {
			t.Errorf("key %s: an abandoned request created order %s, and the retry was answered with order %s (created %v)", key, id, a.order.ID, a.created)
		}
		return true
	})
	t.Logf("%d requests abandoned by their client at %s; %d of them still created their order, later answered to the client's retry as a replay",
		abandoned.Load(), clientTimeout, lateOrders.Load())
	for _, r := range refused {
		t.Errorf("retry refused: %s", r)
	}
	if len(gaveUp) > 0 {
		t.Errorf("%d clients gave up after 90 s of retries, e.g. %s", len(gaveUp), gaveUp[0].key)
	}
	if after == 0 {
		t.Errorf("no order acknowledged after the new primary took writes: the failover was not exercised")
	}

	// The killed member is back; wait until the set is whole and member 0 primary again, so
	// the reads below also cover a rollback on the old primary.
	healed := time.Now()
	if err := restore(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("set healthy with member 0 primary again %s after the burst; %s", time.Since(healed).Round(100*time.Millisecond), rollbacks(victim))

	stored, err := allOrders(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	byOrder := map[string]rawOrder{}
	perKey, perUser, perCart := map[string]int{}, map[string]int{}, map[string]int{}
	sold := map[string]int64{}
	for _, o := range stored {
		byOrder[o.ID] = o
		perKey[o.UserID+"\x00"+o.IdemKey]++
		perUser[o.UserID]++
		perCart[o.CartID]++
		for _, it := range o.Items {
			sold[it.ProductID] += it.Quantity
		}
	}
	lost := 0
	for _, a := range acks {
		o, ok := byOrder[a.order.ID]
		got := map[string]int64{}
		for _, it := range o.Items {
			got[it.ProductID] += it.Quantity
		}
		if !ok || o.UserID != a.user || o.IdemKey != a.key || o.Status != string(order.Created) || !maps.Equal(got, a.lines) {
			if lost++; lost <= 5 {
				t.Errorf("acknowledged order %s (key %s, lines %v): stored %+v (present %v)", a.order.ID, a.key, a.lines, o, ok)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged orders lost or changed", lost, len(acks))
	}
	for k, n := range perKey {
		if n != 1 {
			t.Errorf("%d orders for one (user, Idempotency-Key) %q", n, k)
		}
	}
	for u, n := range perUser {
		if n != 1 {
			t.Errorf("user %s has %d orders, want 1", u, n)
		}
	}
	for c, n := range perCart {
		if n != 1 {
			t.Errorf("cart %s ordered %d times", c, n)
		}
	}
	// An order nobody acknowledged may exist only for a client that gave up (its commit
	// outcome was unknown to it); any other is an order no client asked for.
	asked := map[string]bool{}
	for _, a := range acks {
		asked[a.user+"\x00"+a.key] = true
	}
	quit := map[string]bool{}
	for _, p := range gaveUp {
		quit[p.user+"\x00"+p.key] = true
	}
	for _, o := range stored {
		if k := o.UserID + "\x00" + o.IdemKey; !asked[k] && !quit[k] {
			t.Errorf("order %s (user %s, key %s) stored but never acknowledged", o.ID, o.UserID, o.IdemKey)
		}
	}

	stock, err := stockOf(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range products {
		if stock[p.ID]+sold[p.ID] != initialStock {
			t.Errorf("product %s: stock %d + %d units in stored orders = %d, want %d", p.ID, stock[p.ID], sold[p.ID], stock[p.ID]+sold[p.ID], initialStock)
		}
	}

	ob, total, err := outboxByKey(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	placed := ob[outbox.TopicOrderPlaced]
	for id := range byOrder {
		if placed[id] != 1 {
			t.Errorf("order %s has %d order.placed outbox rows, want 1", id, placed[id])
		}
	}
	for id, n := range placed {
		if _, ok := byOrder[id]; !ok {
			t.Errorf("%d order.placed outbox rows for order %s, which is not stored", n, id)
		}
	}
	t.Logf("after the failover: %d orders stored (%d acknowledged), %d order.placed of %d outbox rows; units sold %v",
		len(stored), len(acks), len(placed), total, sold)
}

// rollbacks says whether member i rolled back writes it had not replicated before it died
// (its log's "Rollback summary"), for the test log.
func rollbacks(i int) string {
	b, err := os.ReadFile(set.Members()[i].LogPath())
	if err != nil {
		return fmt.Sprintf("member %d log: %v", i, err)
	}
	var parts []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `"Rollback summary"`) {
			continue
		}
		var entry struct {
			Attr struct {
				Counts     map[string]int `json:"rollbackCommandCounts"`
				Namespaces []string       `json:"affectedNamespaces"`
				Entries    int            `json:"totalEntriesRolledBackIncludingNoops"`
			} `json:"attr"`
		}
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			parts = append(parts, line)
			continue
		}
		var colls []string
		for _, ns := range entry.Attr.Namespaces {
			colls = append(colls, ns[strings.IndexByte(ns, '.')+1:])
		}
		parts = append(parts, fmt.Sprintf("%d oplog entries (%v) in %v", entry.Attr.Entries, entry.Attr.Counts, colls))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("member %d rejoined without a rollback (a secondary had everything it wrote)", i)
	}
	return fmt.Sprintf("member %d rolled back what no secondary had when it died: %s", i, strings.Join(parts, "; "))
}
