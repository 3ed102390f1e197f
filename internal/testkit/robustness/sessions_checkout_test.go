package robustness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/shop"
)

const (
	checkoutClients  = 2
	checkoutProducts = 4 // products a checkout client's edits choose from
	sessionClients   = 2
	// perKey is how many sessions or history entries one key (one user) collects before the
	// client moves to the next, so that no bounded history stops a client early.
	perKey = 100
	// convergence is how long an acknowledged session or revocation may take to show on a
	// read after the heal: sessions are written and read at ONE, and a replica that missed a
	// write gets it from a hint once it is back.
	convergence = 30 * time.Second
	password    = "robustness horse battery"
)

// sessionOp starts a session, or (caller set) logs in from session caller: a new session
// bound to the user, the caller's revoked. Its answer is the new session's id.
type sessionOp struct{ caller, user string }

// historyOp writes one order-history entry (the projector's HIS-1 write).
type historyOp struct{ user, order string }

// shopWorkload drives the families the hybrid placement puts on Cassandra through the shop's
// services: checkouts of carts edited by one client each (the cart-at-checkout register),
// sessions and logins (a set), history entries (a set).
type shopWorkload struct {
	sh       *shop.Shop
	*gate    // the workload's, where it runs beside one
	run      string
	seed     uint64
	duration time.Duration

	checkout, sessions, history *recorder
	products                    []string
	users                       []account.User // one registered user per session client

	// allReplicas, where set, tells whether session id is stored and the user it is bound to,
	// read at ALL.
	allReplicas func(ctx context.Context, id string) (user string, present bool, err error)

	mu        sync.Mutex
	orderKeys map[string]string // checkout user -> its Idempotency-Key
}

func newShopWorkload(sh *shop.Shop, run string, seed uint64, d time.Duration) *shopWorkload {
	return &shopWorkload{sh: sh, gate: &gate{}, run: run, seed: seed, duration: d, checkout: newRecorder(maxOpsPerKey),
		sessions: newRecorder(maxOpsPerKey), history: newRecorder(maxOpsPerKey), orderKeys: map[string]string{}}
}

// setup creates the products the checkout clients edit and the users the session clients log
// in as (both in the embedded store), retrying until done.
func (x *shopWorkload) setup(ctx context.Context) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	var ps []catalog.Product
	for i := range checkoutProducts {
		x.products = append(x.products, fmt.Sprintf("co-%s-%d", x.run, i))
		ps = append(ps, catalog.Product{ID: x.products[i], Name: "checkout " + x.products[i], Category: "robustness", Price: bankPrice,
			Stock: map[string]int64{zone: 1_000_000}, CreatedAt: now, UpdatedAt: now})
	}
	if err := retry(ctx, func(ctx context.Context) error {
		err := x.sh.Stores.Products.CreateProducts(ctx, ps)
		if errors.Is(err, catalog.ErrExists) {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("create products: %w", err)
	}
	for i := range sessionClients {
		u, err := x.sh.Accounts.Register(ctx, fmt.Sprintf("login-%s-%d@example.com", x.run, i), password)
		if err != nil {
			return fmt.Errorf("register user %d: %w", i, err)
		}
		x.users = append(x.users, u)
	}
	return nil
}

// traffic runs the clients until ctx ends. Client numbers start at 100, apart from the
// workload's.
func (x *shopWorkload) traffic(ctx context.Context) {
	var clients []func(context.Context, int, *rand.Rand)
	for range checkoutClients {
		clients = append(clients, x.checkoutClient)
	}
	for i := range sessionClients {
		clients = append(clients, func(ctx context.Context, c int, rng *rand.Rand) { x.sessionClient(ctx, c, rng, i) })
	}
	clients = append(clients, x.historyClient)
	var wg sync.WaitGroup
	for i, client := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := 100 + i
			client(ctx, c, rand.New(rand.NewPCG(x.seed, uint64(c))))
		}()
	}
	wg.Wait()
}

// checkoutClient, one user per round: 1-4 edits (set a quantity, or remove a line), then a
// checkout; all sequential.
func (x *shopWorkload) checkoutClient(ctx context.Context, c int, rng *rand.Rand) {
	for round := 0; ctx.Err() == nil; round++ {
		user := fmt.Sprintf("co-%s-%d-%d", x.run, c, round)
		key := "cart/" + user
		for range 1 + rng.IntN(4) {
			e := cartEditOp{product: x.products[rng.IntN(len(x.products))], qty: rng.Int64N(4)}
			if _, ok := timed(ctx, x.checkout, c, key, e, func(ctx context.Context) (any, error) {
				var err error
				if e.qty == 0 {
					_, err = x.sh.Carts.Remove(ctx, cart.User(user), e.product)
				} else {
					_, err = x.sh.Carts.Put(ctx, cart.User(user), time.Time{}, e.product, e.qty)
				}
				return nil, err
			}, unknownUnlessRefused()); !ok || ctx.Err() != nil {
				break
			}
			x.pause(ctx, rng)
		}
		if ctx.Err() != nil {
			return // the round ends without its checkout: nothing to check
		}
		ikey := "k-" + user
		x.mu.Lock()
		x.orderKeys[user] = ikey
		x.mu.Unlock()
		timed(ctx, x.checkout, c, key, checkoutOp{key: ikey}, func(ctx context.Context) (any, error) {
			o, _, err := x.sh.Orders.PlaceFromCart(ctx, user, zone, ikey)
			return orderLines(o.Items), err
		}, unknownUnlessRefused(order.ErrEmptyCart))
		x.pause(ctx, rng)
	}
}

// sessionClient starts guest sessions; every other one logs in (user u), which starts a
// session bound to the user and revokes the guest's.
func (x *shopWorkload) sessionClient(ctx context.Context, c int, rng *rand.Rand, u int) {
	for seq := 0; ctx.Err() == nil; seq++ {
		key := fmt.Sprintf("session/%d/%d", c, seq/perKey)
		var guest session.Session
		out, ok := timed(ctx, x.sessions, c, key, sessionOp{}, func(ctx context.Context) (any, error) {
			var err error
			_, guest, err = x.sh.Sessions.Start(ctx, "127.0.0.1", "robustness")
			return guest.ID, err
		}, unknownUnlessRefused())
		if ok && !out.unknown && seq%2 == 1 {
			x.pause(ctx, rng)
			timed(ctx, x.sessions, c, key, sessionOp{caller: guest.ID, user: x.users[u].ID}, func(ctx context.Context) (any, error) {
				res, err := x.sh.Accounts.Login(ctx, account.Login{Caller: guest, Email: x.users[u].Email, Password: password, IP: "127.0.0.1", UserAgent: "robustness"})
				return res.Session.ID, err
			}, unknownUnlessRefused())
		}
		x.pause(ctx, rng)
	}
}

// historyClient writes history entries, perKey per user.
func (x *shopWorkload) historyClient(ctx context.Context, c int, rng *rand.Rand) {
	for seq := 0; ctx.Err() == nil; seq++ {
		user := fmt.Sprintf("hist-%s-%d-%d", x.run, c, seq/perKey)
		in := historyOp{user: user, order: fmt.Sprintf("h-%s-%d-%d", x.run, c, seq)}
		now := time.Now().UTC().Truncate(time.Millisecond)
		timed(ctx, x.history, c, "history/"+user, in, func(ctx context.Context) (any, error) {
			return nil, x.sh.Stores.History.UpsertEntry(ctx, history.Entry{UserID: user, OrderID: in.order, PlacedAt: now, UpdatedAt: now,
				Status: order.Created, Zone: zone, Total: money.Amount(bankPrice),
				Items: []order.Item{{ProductID: "p", Category: "robustness", Name: "p", Quantity: 1, UnitPrice: money.Amount(bankPrice)}}})
		}, unknownUnlessRefused())
		x.pause(ctx, rng)
		x.pause(ctx, rng)
	}
}

// phases counts, per phase of f, the Cassandra-backed writes of this workload and w's orders
// (each puts a line into a Cassandra cart and freezes it) with w's failed cart puts.
func (x *shopWorkload) phases(f fault, w *workload) [3]phase {
	w.mu.Lock()
	failures := slices.Clone(w.failures)
	w.mu.Unlock()
	return phasesOf(f, failures, func(in any) (bool, bool) {
		switch o := in.(type) {
		case stockOp:
			return !o.read, !o.read
		case checkoutOp:
			return true, true
		case cartEditOp, sessionOp, historyOp:
			return true, false
		}
		return false, false
	}, w.stock, x.checkout, x.sessions, x.history)
}

// shopSummary is what the sessions, checkout and history checks covered.
type shopSummary struct {
	carts, cartOps, cartUnknown                    int // checkout histories
	checkouts, checkoutsUnknown, checkoutsResolved int
	sessions, logins, sessionsUnknown, lateSeen    int
	oneOnly                                        int // still wrong at ONE after convergence, right at ALL
	entries, entriesUnknown, orderEntries          int
}

func (x *shopWorkload) report(t *testing.T, nemesis string, s shopSummary) {
	t.Helper()
	t.Logf("nemesis %s: cart at checkout: %d histories, %d operations (%d unknown), %d orders placed (%d checkouts unknown, %d of them found placed after the heal); sessions: %d acknowledged (%d by login), %d unknown, %d right at ONE only after a wait, %d wrong at ONE after %s but right at ALL; history: %d entries acknowledged (%d unknown), %d orders' entries checked; load %s",
		nemesis, s.carts, s.cartOps, s.cartUnknown, s.checkouts, s.checkoutsUnknown, s.checkoutsResolved, s.sessions, s.logins, s.sessionsUnknown, s.lateSeen, s.oneOnly, convergence,
		s.entries, s.entriesUnknown, s.orderEntries, loadavg())
	if s.cartOps == 0 || s.sessions == 0 || s.entries == 0 {
		t.Error("a workload recorded no operation")
	}
	if s.logins == 0 { // the bound-session and revocation checks would have nothing to check
		t.Error("no login was acknowledged")
	}
}

// verify checks the histories once the store is healthy again. w, when set, is the workload
// that ran beside this one: its acknowledged orders must be in their users' history too.
func (x *shopWorkload) verify(t *testing.T, ctx context.Context, w *workload) shopSummary {
	t.Helper()
	var s shopSummary
	x.checkCheckouts(t, ctx, &s)
	x.checkSessions(t, ctx, &s)
	x.checkHistoryEntries(t, ctx, w, &s)
	return s
}

// checkCheckouts resolves every checkout whose answer was lost (its key holds an order or not,
// now that nothing is in flight) and checks each cart's history against checkoutModel.
func (x *shopWorkload) checkCheckouts(t *testing.T, ctx context.Context, s *shopSummary) {
	t.Helper()
	resolved := newRecorder(maxOpsPerKey)
	resolved.start = x.checkout.start
	x.checkout.mu.Lock()
	resolved.faults = slices.Clone(x.checkout.faults)
	x.checkout.mu.Unlock()
	for key, ops := range x.checkout.byKey() {
		for _, o := range ops {
			s.cartOps++
			if o.unknown {
				s.cartUnknown++
			}
			co, isCheckout := o.in.(checkoutOp)
			if isCheckout && !o.unknown && !o.out.(result).refused {
				s.checkouts++
			}
			if isCheckout && o.unknown {
				s.checkoutsUnknown++
				user := key[len("cart/"):]
				got, err := x.checkoutOrder(ctx, user, co.key)
				if err != nil {
					t.Fatalf("look up checkout %s: %v", co.key, err)
				}
				// Known now: it took effect between its call and this read, or never.
				o.unknown, o.ret, o.out = false, time.Now(), result{value: notPlaced}
				if got.ID != "" {
					o.out = result{value: orderLines(got.Items)}
					s.checkoutsResolved++
					s.checkouts++
				}
			}
			resolved.add(o)
		}
	}
	k, _ := checkAll(t, "checkout", resolved, checkoutModel(), checkTimeout)
	s.carts += k
}

// checkSessions: every acknowledged session is there after the heal (a login's bound to its
// user), every guest session an acknowledged login revoked is gone, and a token never handed
// out finds nothing. Sessions are written and read at ONE: a replica that missed a write while
// it was down or cut off gets it from a hint once it is back, so the checks that fail at first
// are retried together for up to convergence. What is still wrong then is looked up at ALL
// (x.allReplicas, where the store has one), which merges every replica's copy: right there,
// the miss is a read at ONE that the replicas have not converged for yet, counted and logged;
// wrong there too (an acknowledged session no replica holds, a revoked one that every replica
// still returns), it fails.
func (x *shopWorkload) checkSessions(t *testing.T, ctx context.Context, s *shopSummary) {
	t.Helper()
	type want struct {
		id, user string
		present  bool
	}
	var wants []want
	open := map[string]bool{} // guests of a login whose outcome is unknown: revoked or not
	for _, ops := range x.sessions.byKey() {
		for _, o := range ops {
			in, r := o.in.(sessionOp), o.out.(result)
			if r.unknown {
				s.sessionsUnknown++
				open[in.caller] = true
				continue
			}
			s.sessions++
			wants = append(wants, want{id: r.value.(string), user: in.user, present: true})
			if in.caller != "" {
				s.logins++
				wants = append(wants, want{id: in.caller}) // revoked by the login
			}
		}
	}
	// A revoked guest is also an acknowledged start: only the revocation is its last word.
	revoked := map[string]bool{}
	for _, w := range wants {
		if !w.present {
			revoked[w.id] = true
		}
	}
	for range 3 {
		_, id, err := session.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		wants = append(wants, want{id: id})
	}
	check := func(ctx context.Context, w want) error {
		got, err := x.sh.Stores.Sessions.GetSession(ctx, w.id, time.Now())
		switch {
		case errors.Is(err, session.ErrNotFound) && !w.present:
			return nil
		case err == nil && w.present && got.UserID == w.user:
			return nil
		case err == nil && w.present:
			return fmt.Errorf("session %s is bound to %q, want %q", w.id, got.UserID, w.user)
		case err == nil || errors.Is(err, session.ErrNotFound):
			return fmt.Errorf("session %s: present %v, want %v", w.id, err == nil, w.present)
		}
		return err
	}
	var wrong []want
	for _, w := range wants {
		if w.present && revoked[w.id] || open[w.id] {
			continue
		}
		if err := retry(ctx, func(ctx context.Context) error {
			err := check(ctx, w)
			if err != nil && strings.HasPrefix(err.Error(), "session ") {
				wrong = append(wrong, w)
				return nil
			}
			return err
		}); err != nil {
			t.Fatalf("read session %s: %v", w.id, err)
		}
	}
	s.lateSeen = len(wrong)
	cctx, cancel := context.WithTimeout(ctx, convergence)
	defer cancel()
	for len(wrong) > 0 && cctx.Err() == nil {
		var still []want
		for _, w := range wrong {
			if check(cctx, w) != nil {
				still = append(still, w)
			}
		}
		wrong = still
		_ = wait(cctx, time.Second)
	}
	s.lateSeen -= len(wrong)
	for _, w := range wrong {
		err := check(ctx, w)
		if x.allReplicas == nil {
			t.Errorf("after the heal and %s: %v", convergence, err)
			continue
		}
		user, present, aerr := x.allReplicas(ctx, w.id)
		if aerr != nil || present != w.present || present && user != w.user {
			t.Errorf("after the heal and %s: %v; at ALL: present %v, user %q, want %q (%v)", convergence, err, present, user, w.user, aerr)
			continue
		}
		s.oneOnly++
		t.Logf("finding: after the heal and %s, a read at ONE still says: %v; ALL has it right (present %v, user %q)", convergence, err, present, user)
	}
}

// checkoutOrder is the order user's checkout with idempotency key placed (zero if none),
// retried until the store answers either way.
func (x *shopWorkload) checkoutOrder(ctx context.Context, user, key string) (order.Order, error) {
	var got order.Order
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		got, err = x.sh.Stores.Orders.ByIdempotencyKey(ctx, user, key)
		if errors.Is(err, order.ErrNotFound) {
			got, err = order.Order{}, nil
		}
		return err
	})
	return got, err
}

// listHistory is every entry of user's history.
func (x *shopWorkload) listHistory(ctx context.Context, user string) (map[string]bool, error) {
	got := map[string]bool{}
	req := paging.Request{Limit: 100}
	for {
		var page paging.Page[history.Entry]
		if err := retry(ctx, func(ctx context.Context) error {
			var err error
			page, err = x.sh.Stores.History.ListHistory(ctx, user, req)
			return err
		}); err != nil {
			return nil, fmt.Errorf("history of %s: %w", user, err)
		}
		for _, e := range page.Items {
			got[e.OrderID] = true
		}
		if page.Next == "" {
			return got, nil
		}
		req.Cursor = page.Next
	}
}

// checkHistoryEntries (HIS-1): every acknowledged entry is in its user's history and no
// entry that was never written is; once the projector has caught up, every acknowledged order (w's and the
// checkouts') is in its user's history.
func (x *shopWorkload) checkHistoryEntries(t *testing.T, ctx context.Context, w *workload, s *shopSummary) {
	t.Helper()
	for key, ops := range x.history.byKey() {
		user := key[len("history/"):]
		got, err := x.listHistory(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		written := map[string]bool{}
		for _, o := range ops {
			in := o.in.(historyOp)
			written[in.order] = true
			if o.unknown {
				s.entriesUnknown++
				continue
			}
			s.entries++
			if !got[in.order] {
				t.Errorf("history of %s lost the acknowledged entry %s", user, in.order)
			}
		}
		for id := range got {
			if !written[id] {
				t.Errorf("history of %s holds %s, which was never written", user, id)
			}
		}
	}
	if err := retry(ctx, x.sh.Projector.Sync); err != nil {
		t.Fatalf("projector: %v", err)
	}
	placed := map[string]string{} // order id -> user
	if w != nil {
		for _, o := range w.orders {
			if !o.out.unknown && !o.out.refused {
				placed[o.id] = o.user
			}
		}
	}
	for user, ikey := range x.orderKeys {
		o, err := x.checkoutOrder(ctx, user, ikey)
		if err != nil {
			t.Fatalf("look up the order of checkout %s of %s: %v", ikey, user, err)
		}
		if o.ID != "" {
			placed[o.ID] = user
		}
	}
	for id, user := range placed {
		got, err := x.listHistory(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		s.orderEntries++
		if !got[id] {
			t.Errorf("order %s of %s is not in its history after the projector caught up", id, user)
		}
	}
}

// TestSQLiteSessionsCheckout runs the sessions, checkout and history workloads against the
// embedded store with no nemesis, as TestSQLite does the others.
func TestSQLiteSessionsCheckout(t *testing.T) {
	t.Parallel()
	cfg := runSettings(t)
	for r := range cfg.repeat {
		t.Run(fmt.Sprintf("none/%d", r), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+2*time.Minute)
			defer cancel()
			sh := embeddedShop(t, ctx)
			x := newShopWorkload(sh, runName("x"), cfg.seed+uint64(r), cfg.duration)
			if err := x.setup(ctx); err != nil {
				t.Fatal(err)
			}
			tctx, stop := context.WithTimeout(ctx, cfg.duration)
			x.traffic(tctx)
			stop()
			x.report(t, "none", x.verify(t, ctx, nil))
		})
	}
}
