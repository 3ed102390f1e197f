package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/shop"
)

const (
	zone = "eu-west"
	// opTimeout bounds each recorded operation: past it the outcome is unknown. Longer than a
	// healthy operation under load, shorter than a failover, so faults produce unknowns.
	opTimeout = 3 * time.Second
	// maxOpsPerKey bounds each key's history, so that porcupine checks it in bounded time.
	maxOpsPerKey = 300
	// checkTimeout is what porcupine may spend on one key's history; running out fails.
	checkTimeout = 30 * time.Second

	// unitsPerSecond sizes each bank product's stock from the traffic's length: enough that a
	// MongoDB run (a few units a second per product) still sells during and after the fault,
	// few enough that the SQLite run (tens a second) sells out and records refusals.
	unitsPerSecond = 20
	bankPrice      = 1000
	cartUsers      = 2
	cartLines      = 12 // distinct products each cart user puts, at most
)

// workload drives the shop's services (the code paths the HTTP API calls) and records what
// every client was told.
type workload struct {
	sh   *shop.Shop
	run  string // unique per run: every id it makes carries it
	seed uint64
	// keys is how many products and orders each history kind has: more for a longer run, so
	// that bounded histories do not stop the clients early.
	keys int
	// duration is how long traffic runs; from is when it began. Cart lines and the orders
	// whose status moves are spread over it, so that some meet the fault.
	duration time.Duration
	from     time.Time
	// initialStock is every bank product's stock at setup.
	initialStock int64

	stock, status, price *recorder
	// pricePage and statusPage are reads the read table lets lag (5 s): a product page, an
	// order status that is not "created". They are checked for staleness, not linearizability.
	pricePage, statusPage *recorder
	// historyPage is order-history reads (ORD-2, 10 s budget): the status each order's entry
	// shows, checked for staleness against the status moves.
	historyPage *recorder

	bank      []string // products sold (stock) and repriced (price)
	items     []string // products the cart users put
	statusIDs []string // orders whose status is moved and read

	*gate

	mu        sync.Mutex
	orders    []placed        // every order attempted, acknowledged or not
	cartPuts  map[string]puts // cart user -> product -> outcome
	failures  []time.Time     // when operations in no history failed (cart puts, status reads)
	internal  []string        // errors of operations in no history that the API would answer 500
	nextPrice int64
}

type puts map[string]result

// placed is one PlaceFromCart as its client saw it.
type placed struct {
	user, key, product, id string
	qty                    int64
	out                    result
}

// newWorkload: d is how long traffic runs in all (the fault and the recovery after it included).
func newWorkload(sh *shop.Shop, run string, seed uint64, d time.Duration) *workload {
	return &workload{sh: sh, gate: &gate{}, run: run, seed: seed, keys: max(3, int(d/(3*time.Second))), duration: d, initialStock: int64(d.Seconds()+1) * unitsPerSecond,
		stock: newRecorder(maxOpsPerKey), status: newRecorder(maxOpsPerKey),
		price: newRecorder(maxOpsPerKey), pricePage: newRecorder(maxOpsPerKey), statusPage: newRecorder(maxOpsPerKey), historyPage: newRecorder(maxOpsPerKey), cartPuts: map[string]puts{}, nextPrice: bankPrice}
}

// setup creates the products and the orders the clients work on. It is not recorded: it runs
// on a healthy store and retries until done.
func (w *workload) setup(ctx context.Context) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	product := func(id string, stock int64) catalog.Product {
		return catalog.Product{ID: id, Name: "robustness " + id, Category: "robustness", Price: bankPrice,
			Stock: map[string]int64{zone: stock}, CreatedAt: now, UpdatedAt: now}
	}
	var ps []catalog.Product
	for i := range w.keys {
		w.bank = append(w.bank, fmt.Sprintf("bank-%s-%d", w.run, i))
		ps = append(ps, product(w.bank[i], w.initialStock))
	}
	for i := range cartLines {
		w.items = append(w.items, fmt.Sprintf("item-%s-%d", w.run, i))
		ps = append(ps, product(w.items[i], 1_000_000))
	}
	statusProduct := "status-" + w.run
	ps = append(ps, product(statusProduct, 1_000_000))
	if err := retry(ctx, func(ctx context.Context) error {
		err := w.sh.Stores.Products.CreateProducts(ctx, ps)
		if errors.Is(err, catalog.ErrExists) { // an earlier attempt went through
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("create products: %w", err)
	}
	// Placed setupClients at a time: a run sized for a Cassandra node's restart places a few
	// hundred, each a cart put and a checkout, which one after the other took about a minute.
	w.statusIDs = make([]string, 2*w.keys)
	errs := make([]error, len(w.statusIDs))
	next := make(chan int, len(w.statusIDs))
	for i := range w.statusIDs {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range setupClients {
		wg.Go(func() {
			for i := range next {
				errs[i] = w.placeStatusOrder(ctx, i, statusProduct)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// setupClients is how many setup orders are placed at once.
const setupClients = 8

// placeStatusOrder places the i-th order the status clients move (one unit of product, as
// the i-th status user), retrying until done.
func (w *workload) placeStatusOrder(ctx context.Context, i int, product string) error {
	user := statusUser(w.run, i)
	if err := retry(ctx, func(ctx context.Context) error {
		if _, err := w.sh.Carts.Put(ctx, cart.User(user), time.Time{}, product, 1); err != nil {
			return err
		}
		o, _, err := w.sh.Orders.PlaceFromCart(ctx, user, zone, "setup")
		w.statusIDs[i] = o.ID
		return err
	}); err != nil {
		return fmt.Errorf("place order %d to move through its statuses: %w", i, err)
	}
	return nil
}

// retry runs fn, each attempt bounded by opTimeout, until it succeeds or ctx ends.
func retry(ctx context.Context, fn func(context.Context) error) error {
	return eventually.Until(ctx, func() error {
		actx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		return fn(actx)
	})
}

// traffic runs the clients until ctx ends.
func (w *workload) traffic(ctx context.Context) {
	w.from = time.Now()
	var wg sync.WaitGroup
	clients := []func(context.Context, int, *rand.Rand){
		w.orderClient, w.orderClient, w.orderClient, w.stockReader,
		w.statusClient, w.statusClient, w.statusClient,
		w.priceWriter, w.priceReader,
	}
	for i := range cartUsers {
		clients = append(clients, func(ctx context.Context, c int, rng *rand.Rand) { w.cartClient(ctx, c, rng, i) })
	}
	clients = append(clients, w.historyReader)
	for c, client := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			client(ctx, c, rand.New(rand.NewPCG(w.seed, uint64(c))))
		}()
	}
	wg.Wait()
}

// timed runs one operation of client c on key, bounded by opTimeout, and records it with the
// answer classify gives its error (nil: unknown). It returns false once key's history is full.
func timed(ctx context.Context, r *recorder, c int, key string, in any, do func(context.Context) (any, error), classify func(error) (result, bool)) (result, bool) {
	if !r.reserve(key) {
		return result{}, false
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	call := time.Now()
	v, err := do(octx)
	ret := time.Now()
	cancel()
	o := op{client: c, key: key, in: in, call: call, ret: ret}
	switch {
	case err == nil:
		o.out = result{value: v}
	case ctx.Err() == nil && httpapi.StatusOf(err) == http.StatusInternalServerError:
		r.internalError(key, err)
		fallthrough
	default:
		res, known := classify(err)
		if !known {
			res, o.unknown = result{unknown: true}, true
		}
		o.out = res
	}
	r.add(o)
	return o.out.(result), true
}

// unknownUnlessRefused: only the errors listed are definite refusals; everything else
// (timeouts, lost connections, "unavailable") leaves the outcome open.
func unknownUnlessRefused(refusals ...any) func(error) (result, bool) {
	return func(err error) (result, bool) {
		for _, r := range refusals {
			switch r := r.(type) {
			case error:
				if errors.Is(err, r) {
					return result{refused: true}, true
				}
			case func(error) bool:
				if r(err) {
					return result{refused: true}, true
				}
			}
		}
		return result{}, false
	}
}

func insufficientStock(err error) bool {
	var e *catalog.InsufficientStockError
	return errors.As(err, &e)
}

// orderClient orders 1-3 units of a bank product, each time as a new user with a one-line
// cart, so that an order whose outcome is unknown (its cart stays frozen) holds up nobody.
func (w *workload) orderClient(ctx context.Context, c int, rng *rand.Rand) {
	for seq := 0; ctx.Err() == nil; seq++ {
		p := w.bank[rng.IntN(len(w.bank))]
		qty := 1 + rng.Int64N(3)
		user := fmt.Sprintf("buyer-%s-%d-%d", w.run, c, seq)
		pctx, cancel := context.WithTimeout(ctx, opTimeout)
		_, err := w.sh.Carts.Put(pctx, cart.User(user), time.Time{}, p, qty)
		cancel()
		if err != nil {
			w.failed(ctx, err)
			w.pause(ctx, rng) // no order without a cart line; not part of the stock history
			continue
		}
		key := "k-" + user
		var id string
		out, ok := timed(ctx, w.stock, c, "stock/"+p, stockOp{qty: qty}, func(ctx context.Context) (any, error) {
			o, _, err := w.sh.Orders.PlaceFromCart(ctx, user, zone, key)
			id = o.ID
			return nil, err
		}, unknownUnlessRefused(insufficientStock))
		if !ok {
			if allFull(w.stock, "stock/", w.bank) {
				return
			}
			continue
		}
		w.mu.Lock()
		w.orders = append(w.orders, placed{user: user, key: key, product: p, id: id, qty: qty, out: out})
		w.mu.Unlock()
		w.pause(ctx, rng)
	}
}

// allFull reports whether every key prefix+k of r is full for the clients.
func allFull(r *recorder, prefix string, keys []string) bool {
	full := make([]string, len(keys))
	for i, k := range keys {
		full[i] = prefix + k
	}
	return r.full(full)
}

// readStock is a strong read of a product's stock: the store of record as it is now (the
// primary), as ordering reads it. The product page (Products.GetProduct) may read a secondary.
func (w *workload) readStock(ctx context.Context, p string) (any, error) {
	pr, err := w.sh.Stores.ProductSource.GetProduct(ctx, p)
	if err != nil {
		return nil, err
	}
	return pr.Stock[zone], nil
}

func (w *workload) stockReader(ctx context.Context, c int, rng *rand.Rand) {
	for ctx.Err() == nil {
		p := w.bank[rng.IntN(len(w.bank))]
		// A read that fails constrains nothing: it is recorded as unknown and the model lets it be.
		if _, ok := timed(ctx, w.stock, c, "stock/"+p, stockOp{read: true}, func(ctx context.Context) (any, error) {
			return w.readStock(ctx, p)
		}, unknownUnlessRefused()); !ok && allFull(w.stock, "stock/", w.bank) {
			return
		}
		w.pause(ctx, rng)
	}
}

// readStatus reads an order's status as the API shows it. The read table lets it come from a
// secondary within 5 s, except that a "created" (not paid) answer is always the primary's: a
// stale "not paid" could make a user pay twice. So a "created" answer goes into the history
// checked for linearizability, any other into the one checked for staleness.
func (w *workload) readStatus(ctx context.Context, c int, id string) bool {
	if !w.status.reserve("status/" + id) {
		return false
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	call := time.Now()
	o, err := w.sh.Orders.Get(octx, id)
	rec := op{client: c, key: "status/" + id, in: statusOp{}, call: call, ret: time.Now(), out: result{value: o.Status}}
	switch {
	case err != nil:
		w.failed(ctx, err) // a read that failed tells nothing about the status
		return true
	case o.Status == order.Created:
		w.status.add(rec)
	default:
		w.statusPage.add(rec)
	}
	return true
}

var statuses = []order.Status{order.Paid, order.Shipped, order.Delivered, order.Cancelled}

// statusClient moves orders through the state machine (ORD-3) and reads their status, which
// the docs say is read from the primary.
func (w *workload) statusClient(ctx context.Context, c int, rng *rand.Rand) {
	for ctx.Err() == nil {
		// Order j may move from j/n of the run on: its transitions are spread over the run
		// instead of all settling in the first second.
		i := rng.IntN(len(w.statusIDs))
		id := w.statusIDs[i]
		movable := time.Since(w.from) >= w.duration*time.Duration(i)/time.Duration(len(w.statusIDs))
		var ok bool
		if movable && rng.IntN(4) == 0 {
			to := statuses[rng.IntN(len(statuses))]
			_, ok = timed(ctx, w.status, c, "status/"+id, statusOp{to: to}, func(ctx context.Context) (any, error) {
				_, err := w.sh.Orders.Transition(ctx, id, to)
				return nil, err
			}, unknownUnlessRefused(order.ErrIllegalTransition))
		} else {
			ok = w.readStatus(ctx, c, id)
		}
		if !ok && allFull(w.status, "status/", w.statusIDs) {
			return
		}
		w.pause(ctx, rng)
	}
}

// priceWriter reprices the bank products (each price set once) while orders read them.
func (w *workload) priceWriter(ctx context.Context, c int, rng *rand.Rand) {
	for ctx.Err() == nil {
		p := w.bank[rng.IntN(len(w.bank))]
		w.mu.Lock()
		w.nextPrice++
		price := w.nextPrice
		w.mu.Unlock()
		if _, ok := timed(ctx, w.price, c, "price/"+p, priceOp{price: price}, func(ctx context.Context) (any, error) {
			_, err := w.sh.Stores.Products.UpdateProduct(ctx, p, func(pr *catalog.Product) error {
				pr.Price = money.Amount(price)
				return nil
			})
			return nil, err
		}, unknownUnlessRefused()); !ok && allFull(w.price, "price/", w.bank) {
			return
		}
		w.pause(ctx, rng)
	}
}

// readPrice is the price as checkout reads it (PRD-4): from the store of record as it is now.
func (w *workload) readPrice(ctx context.Context, p string) (any, error) {
	pr, err := w.sh.Stores.ProductSource.GetProduct(ctx, p)
	return int64(pr.Price), err
}

// pagePrice is the price on the product page (PRD-3), which may lag by its 5 s budget.
func (w *workload) pagePrice(ctx context.Context, p string) (any, error) {
	pr, err := w.sh.Stores.Products.GetProduct(ctx, p)
	return int64(pr.Price), err
}

func (w *workload) priceReader(ctx context.Context, c int, rng *rand.Rand) {
	for ctx.Err() == nil {
		p := w.bank[rng.IntN(len(w.bank))]
		r, read := w.price, w.readPrice
		if rng.IntN(2) == 0 {
			r, read = w.pricePage, w.pagePrice
		}
		if _, ok := timed(ctx, r, c, "price/"+p, priceOp{read: true}, func(ctx context.Context) (any, error) {
			return read(ctx, p)
		}, unknownUnlessRefused()); !ok && allFull(w.price, "price/", w.bank) {
			return
		}
		w.pause(ctx, rng)
	}
}

// cartClient puts distinct products into one user's cart, one line each.
func (w *workload) cartClient(ctx context.Context, c int, rng *rand.Rand, u int) {
	user := fmt.Sprintf("cart-%s-%d", w.run, u)
	w.mu.Lock()
	w.cartPuts[user] = puts{}
	w.mu.Unlock()
	for _, p := range w.items {
		if ctx.Err() != nil {
			return
		}
		pctx, cancel := context.WithTimeout(ctx, opTimeout)
		_, err := w.sh.Carts.Put(pctx, cart.User(user), time.Time{}, p, 1)
		cancel()
		res := result{}
		if err != nil {
			res = result{unknown: true}
			w.failed(ctx, err)
		}
		w.mu.Lock()
		w.cartPuts[user][p] = res
		w.mu.Unlock()
		// Spread over the run, so that some lines are put during the fault.
		if wait(ctx, w.duration/time.Duration(len(w.items)+1)) != nil {
			return
		}
	}
}

// failed notes that an operation in no history failed just now, and holds its error to
// "never a 500" while the run goes on (ctx live).
func (w *workload) failed(ctx context.Context, err error) {
	w.mu.Lock()
	w.failures = append(w.failures, time.Now())
	if ctx.Err() == nil && httpapi.StatusOf(err) == http.StatusInternalServerError {
		w.internal = append(w.internal, err.Error())
	}
	w.mu.Unlock()
}

// checkInternal fails the run for every error the API would have answered 500.
func (w *workload) checkInternal(t *testing.T) {
	t.Helper()
	all := slices.Clone(w.internal)
	for _, r := range []*recorder{w.stock, w.status, w.price, w.pricePage, w.statusPage, w.historyPage} {
		r.mu.Lock()
		all = append(all, r.internal...)
		r.mu.Unlock()
	}
	if len(all) > 0 {
		t.Errorf("%d errors the API would answer 500 (a store state not read as transient, or a bug), first: %s", len(all), strings.Join(all[:min(5, len(all))], "; "))
	}
}

// phase is what the clients saw in one phase of a run: writes acknowledged (orders among
// them) by their call time; operations that failed or were left unknown, and answers that
// stalled, by the time they gave up or answered (a fault hits operations called just before
// it too).
type phase struct{ acked, orders, failed, stalled int }

// stall is an answer slow enough to be the fault's doing: the driver waiting out a failover
// (retryable writes hide a crashed primary's errors from the caller, not the wait).
const stall = opTimeout / 2

// phases splits the run at fault f: before it, while it lasted, after its heal. Final reads
// are not traffic and are left out.
func (w *workload) phases(f fault) [3]phase {
	w.mu.Lock()
	failures := slices.Clone(w.failures)
	w.mu.Unlock()
	return phasesOf(f, failures, func(in any) (bool, bool) {
		_, order := in.(stockOp)
		return isWrite(in), order
	}, w.stock, w.status, w.price, w.pricePage, w.statusPage)
}

// phasesOf counts the operations of rs, and the failures of operations in no history, in
// each phase of fault f; kind says whether an input is a write, and whether an order.
func phasesOf(f fault, failures []time.Time, kind func(in any) (write, order bool), rs ...*recorder) [3]phase {
	var p [3]phase
	at := func(call time.Time) int {
		switch {
		case call.Before(f.from):
			return 0
		case call.Before(f.to):
			return 1
		}
		return 2
	}
	for _, r := range rs {
		for _, ops := range r.byKey() {
			for _, o := range ops {
				switch {
				case o.client < 0: // a final read is not traffic
					continue
				case o.unknown:
					p[at(o.ret)].failed++
					continue
				case o.ret.Sub(o.call) >= stall:
					p[at(o.ret)].stalled++
				}
				if write, order := kind(o.in); write && !o.out.(result).refused {
					i := at(o.call)
					p[i].acked++
					if order {
						p[i].orders++
					}
				}
			}
		}
	}
	for _, when := range failures {
		p[at(when)].failed++
	}
	return p
}

// pageReadsIn counts the page reads (product page, status not "created") of the clients that
// began at or after from and were answered before healing: reads served while the fault held.
func (w *workload) pageReadsIn(from, healing time.Time) int {
	return answeredWithin(w.pricePage, from, healing) + answeredWithin(w.statusPage, from, healing)
}

// answeredWithin counts r's client reads with a known answer, called at or after from and
// returned before until.
func answeredWithin(r *recorder, from, until time.Time) int {
	n := 0
	for _, ops := range r.byKey() {
		for _, o := range ops {
			if !o.unknown && o.client >= 0 && !o.call.Before(from) && o.ret.Before(until) {
				n++
			}
		}
	}
	return n
}

// isWrite: an order, a status move or a price change (not a read).
func isWrite(in any) bool {
	switch o := in.(type) {
	case stockOp:
		return !o.read
	case statusOp:
		return o.to != ""
	case priceOp:
		return !o.read
	}
	return false
}

// gate holds clients between operations while it is shut (hush): a run whose fault outlasts
// the traffic the stock and the keys are sized for stops issuing until the heal.
type gate struct{ shut atomic.Bool }

// pause is a client's pause between operations, held on while the gate is shut.
func (g *gate) pause(ctx context.Context, rng *rand.Rand) {
	pause(ctx, rng)
	for g.shut.Load() && ctx.Err() == nil {
		_ = wait(ctx, 50*time.Millisecond)
	}
}

// hush shuts the gate (on true) or opens it (on false).
func (g *gate) hush(on bool) { g.shut.Store(on) }

// pause spaces a client's operations by 0-50 ms, so that reads interleave with writes.
func pause(ctx context.Context, rng *rand.Rand) {
	t := time.NewTimer(time.Duration(rng.IntN(50)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// finalTimeout bounds the final reads: past it the run fails rather than leave a key's last
// word unknown.
const finalTimeout = 30 * time.Second

// finalRead takes key's last slot in r and reads it once the store is healthy again, retrying
// (each attempt bounded by opTimeout) until an attempt answers; only that attempt is returned,
// for the caller to record. No answer within finalTimeout is an error.
func finalRead(ctx context.Context, r *recorder, key string, in any, do func(context.Context) (any, error)) (op, error) {
	if !r.reserveLast(key) {
		return op{}, fmt.Errorf("no room left in the history of %s for the final read", key)
	}
	fctx, cancel := context.WithTimeout(ctx, finalTimeout)
	defer cancel()
	var o op
	err := retry(fctx, func(ctx context.Context) error {
		call := time.Now()
		v, err := do(ctx)
		o = op{client: -1, key: key, in: in, call: call, ret: time.Now(), out: result{value: v}}
		return err
	})
	if err != nil {
		return op{}, fmt.Errorf("final read of %s: no answer within %s: %w", key, finalTimeout, err)
	}
	return o, nil
}

// finalReads records one read of every key once the store is healthy again: the history's
// last word, against which every unknown outcome must be explained. A status read lands in
// the history readStatus would put it in.
func (w *workload) finalReads(ctx context.Context) error {
	var errs []error
	record := func(r *recorder, o op, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		r.add(o)
	}
	for _, p := range w.bank {
		o, err := finalRead(ctx, w.stock, "stock/"+p, stockOp{read: true}, func(ctx context.Context) (any, error) { return w.readStock(ctx, p) })
		record(w.stock, o, err)
		o, err = finalRead(ctx, w.price, "price/"+p, priceOp{read: true}, func(ctx context.Context) (any, error) { return w.readPrice(ctx, p) })
		record(w.price, o, err)
	}
	for _, id := range w.statusIDs {
		o, err := finalRead(ctx, w.status, "status/"+id, statusOp{}, func(ctx context.Context) (any, error) {
			o, err := w.sh.Orders.Get(ctx, id)
			return o.Status, err
		})
		if err == nil && o.out.(result).value != order.Created {
			record(w.statusPage, o, nil)
			continue
		}
		record(w.status, o, err)
	}
	return errors.Join(errs...)
}

// summary is what one run checked.
type summary struct {
	keys, ops, unknown int
	acked, refused     int // orders
	unknownOrders      int
	unknownApplied     int // unknown orders found stored after the heal
	cartAcked          int
	stale              int // reads checked against their staleness budget
}

// stalenessBudget is RPL-1's budget for the product page and a status that is not "created".
const stalenessBudget = 5 * time.Second

// checkStale checks every page read of a key against the writes in that key's strong history.
func checkStale(t *testing.T, name string, strong, page *recorder, initial any, value func(in any) (any, bool)) int {
	t.Helper()
	return checkStaleWithin(t, name, strong, page, initial, value, nil, stalenessBudget)
}

// checkStaleWithin is checkStale with another budget, and with writes made before the
// history began (setup) added to every key's.
func checkStaleWithin(t *testing.T, name string, strong, page *recorder, initial any, value func(in any) (any, bool), before []written, budget time.Duration) int {
	t.Helper()
	writes := strong.byKey()
	n := 0
	for key, reads := range page.byKey() {
		for _, r := range reads {
			if !r.unknown { // an unknown read is not checked (stale skips it)
				n++
			}
		}
		errs := stale(initial, append(slices.Clone(before), writesOf(writes[key], value)...), reads, budget)
		for i, err := range errs {
			if i == 5 {
				t.Errorf("%s %s: %d more stale reads", name, key, len(errs)-i)
				break
			}
			t.Errorf("%s %s: %v", name, key, err)
		}
		if len(errs) > 0 {
			where := "?"
			if dir, err := outDir(); err == nil {
				where, err = writeText(dir, t.Name()+"-"+name+"-stale-"+key, append(slices.Clone(writes[key]), reads...), strong)
				if err != nil {
					where = err.Error()
				}
			}
			t.Errorf("%s %s: the history with the stale reads: %s", name, key, where)
		}
	}
	return n
}

// verify checks the recorded histories once the store is healthy: linearizability per key,
// the stock conservation (stock + units in stored orders = initial, never below zero), and
// the sets (every acknowledged order and cart line present, nothing refused stored).
func (w *workload) verify(t *testing.T, ctx context.Context) summary {
	t.Helper()
	var s summary
	if err := w.finalReads(ctx); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		name  string
		r     *recorder
		model porcupine.Model
	}{
		{"stock", w.stock, stockModel(w.initialStock)}, {"status", w.status, statusModel()}, {"price", w.price, registerModel(bankPrice)},
	} {
		k, n := checkAll(t, c.name, c.r, c.model, checkTimeout)
		_, u := c.r.counts()
		s.keys, s.ops, s.unknown = s.keys+k, s.ops+n, s.unknown+u
	}
	s.stale += checkStale(t, "price", w.price, w.pricePage, int64(bankPrice), func(in any) (any, bool) {
		o := in.(priceOp)
		return o.price, !o.read
	})
	s.stale += checkStale(t, "status", w.status, w.statusPage, order.Created, func(in any) (any, bool) {
		o := in.(statusOp)
		return o.to, o.to != ""
	})
	w.checkHistory(t)
	w.checkInternal(t)
	w.checkOrders(t, ctx, &s)
	w.checkCarts(t, ctx, &s)
	return s
}

// checkOrders: every acknowledged order is stored under its key with its id, no refused one
// is, and for each bank product the stock left plus the units in stored orders is the stock
// it started with.
func (w *workload) checkOrders(t *testing.T, ctx context.Context, s *summary) {
	t.Helper()
	sold := map[string]int64{}
	for _, o := range w.orders {
		var got order.Order
		err := retry(ctx, func(ctx context.Context) error {
			var err error
			got, err = w.sh.Stores.Orders.ByIdempotencyKey(ctx, o.user, o.key)
			if errors.Is(err, order.ErrNotFound) {
				return nil
			}
			return err
		})
		if err != nil {
			t.Fatalf("read back order %s of %s: %v", o.key, o.user, err)
		}
		stored := got.ID != ""
		switch {
		case o.out.unknown:
			s.unknownOrders++
			if stored {
				s.unknownApplied++
			}
		case o.out.refused:
			s.refused++
			if stored {
				t.Errorf("order %s of %s was refused (insufficient stock) but is stored as %s", o.key, o.user, got.ID)
			}
		default:
			s.acked++
			if !stored || got.ID != o.id {
				t.Errorf("acknowledged order %s (key %s of %s) is not stored as such after the heal: found %q", o.id, o.key, o.user, got.ID)
			}
		}
		if stored {
			for _, it := range got.Items {
				sold[it.ProductID] += it.Quantity
			}
		}
	}
	for _, p := range w.bank {
		var left int64
		if err := retry(ctx, func(ctx context.Context) error {
			v, err := w.readStock(ctx, p)
			left, _ = v.(int64)
			return err
		}); err != nil {
			t.Fatalf("read stock of %s: %v", p, err)
		}
		if left < 0 {
			t.Errorf("product %s: stock %d, below zero", p, left)
		}
		if left+sold[p] != w.initialStock {
			t.Errorf("product %s: stock %d + %d units in stored orders = %d, want %d", p, left, sold[p], left+sold[p], w.initialStock)
		}
	}
}

// checkCarts: every acknowledged cart line is in its cart after the heal, and no line that
// was never put is.
func (w *workload) checkCarts(t *testing.T, ctx context.Context, s *summary) {
	t.Helper()
	for user, put := range w.cartPuts {
		var c cart.Cart
		if err := retry(ctx, func(ctx context.Context) error {
			var err error
			c, err = w.sh.Carts.Get(ctx, cart.User(user))
			if errors.Is(err, cart.ErrNotFound) {
				c, err = cart.Cart{}, nil
			}
			return err
		}); err != nil {
			t.Fatalf("read back the cart of %s: %v", user, err)
		}
		var have []string
		for _, it := range c.Items {
			have = append(have, it.ProductID)
			if _, ok := put[it.ProductID]; !ok {
				t.Errorf("cart of %s holds %s, which was never put", user, it.ProductID)
			}
		}
		for p, res := range put {
			if !res.unknown {
				s.cartAcked++
				if !slices.Contains(have, p) {
					t.Errorf("cart of %s lost the acknowledged line %s: holds %v", user, p, have)
				}
			}
		}
	}
}

// A hushed workload's clients start no operation until the hush ends: a kill run relies on it
// to keep its stock and keys for the orders after a long restart.
func TestHushHoldsClients(t *testing.T) {
	w := &workload{gate: &gate{}}
	w.hush(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.pause(ctx, rand.New(rand.NewPCG(1, 1)))
	}()
	// Past pause's own 50 ms at most, with room for a loaded machine.
	select {
	case <-done:
		t.Fatal("a client went on while the workload was hushed")
	case <-time.After(300 * time.Millisecond):
	}
	w.hush(false)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("a client stayed held after the hush ended")
	}
}
