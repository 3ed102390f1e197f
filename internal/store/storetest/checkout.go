package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
)

// raceTries is how many times each checkout race is run; before the freeze existed, the
// removal race lost in about 7 % of tries through HTTP.
const raceTries = 40

// CartCheckout is the cart side of checkout and login (CRT-5, ORD-1): the merge rule when the
// user's cart is full, the freeze a checkout puts on the cart, its lease and release, and the
// races a freeze must win, each tried raceTries times.
func CartCheckout(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Run("CRT-5 merge into a full cart keeps the known lines and reports the rest", func(t *testing.T) { cartCheckoutMergeIntoFull(t, newRepo) })
	t.Run("ORD-1 a frozen cart refuses changes until its checkout ends", func(t *testing.T) { cartCheckoutFrozenRefusesChanges(t, newRepo) })
	t.Run("ORD-1 a stale checkout is reported, reopened into a new cart, or ordered", func(t *testing.T) { cartCheckoutStaleLease(t, newRepo) })
	t.Run("CRT-5 a guest cannot change a cart that login merged", func(t *testing.T) { cartCheckoutGuestAfterMerge(t, newRepo) })
	// Each race: a change and a freeze (or a merge) run at once. Whatever the interleaving, an
	// acknowledged change is in what the freeze (or merge) saw, and a refused one is not.
	t.Run("ORD-1 removal racing with checkout: acknowledged means not ordered", func(t *testing.T) { cartCheckoutRemovalRace(t, newRepo) })
	t.Run("ORD-1 addition racing with checkout: acknowledged means ordered", func(t *testing.T) { cartCheckoutAdditionRace(t, newRepo) })
	t.Run("CRT-5 login merge racing with checkout: merged lines are ordered or stay the guest's", func(t *testing.T) { cartCheckoutMergeRace(t, newRepo) })
	t.Run("CRT-5 guest put racing with that guest's login: acknowledged means merged", func(t *testing.T) { cartCheckoutGuestPutLoginRace(t, newRepo) })
}

func cartCheckoutMergeIntoFull(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	sid, userID := uid("s"), uid("u")
	full := make([]cart.Item, cart.MaxItems)
	for i := range full {
		full[i] = item(fmt.Sprintf("p%03d", i), 1)
	}
	putItems(t, r, cart.User(userID), never, full...)
	putItems(t, r, cart.Guest(sid), base.Add(time.Hour), item("new1", 2), item("p005", 4), item("new2", 1))
	res, err := r.Merge(ctx, sid, userID, base)
	if err != nil {
		t.Fatal(err)
	}
	got := quantities(res.Cart)
	if len(got) != cart.MaxItems || got["p005"] != 5 || got["new1"] != 0 {
		t.Errorf("merged cart: %d lines, p005=%d, new1=%d; want %d lines, p005=5, no new1", len(got), got["p005"], got["new1"], cart.MaxItems)
	}
	if !equalQty(lineQty(res.NotMerged), map[string]int64{"new1": 2, "new2": 1}) {
		t.Errorf("not merged: got %v, want new1=2 and new2=1", lineQty(res.NotMerged))
	}
}

func cartCheckoutFrozenRefusesChanges(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	u := cart.User(uid("u"))
	putItems(t, r, u, never, item("a", 1), item("b", 2))
	orderID := uid("o")
	frozen, err := r.BeginCheckout(ctx, u, orderID, base.Add(time.Minute), base)
	if err != nil || !equalQty(quantities(frozen), map[string]int64{"a": 1, "b": 2}) || frozen.CheckoutOrder != orderID {
		t.Fatalf("begin checkout: %+v, %v", frozen, err)
	}
	if _, err := r.PutItem(ctx, u, item("c", 1), never, base); !errors.Is(err, cart.ErrCheckoutInProgress) {
		t.Errorf("put during checkout: got %v, want ErrCheckoutInProgress", err)
	}
	if _, err := r.RemoveItem(ctx, u, "a", base); !errors.Is(err, cart.ErrCheckoutInProgress) {
		t.Errorf("remove during checkout: got %v, want ErrCheckoutInProgress", err)
	}
	sid := uid("s")
	putItems(t, r, cart.Guest(sid), base.Add(time.Hour), item("g", 1))
	if _, err := r.Merge(ctx, sid, u.UserID, base); !errors.Is(err, cart.ErrCheckoutInProgress) {
		t.Errorf("merge during checkout: got %v, want ErrCheckoutInProgress", err)
	}
	if g, err := r.ActiveCart(ctx, cart.Guest(sid), base); err != nil || len(g.Items) != 1 {
		t.Errorf("a refused merge touched the guest cart: %+v, %v", g, err)
	}
	if _, err := r.BeginCheckout(ctx, u, uid("o"), base.Add(time.Minute), base); !errors.Is(err, cart.ErrCheckoutInProgress) {
		t.Errorf("second checkout: got %v, want ErrCheckoutInProgress", err)
	}
	if err := r.EndCheckout(ctx, u, frozen.ID, uid("o"), base); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RemoveItem(ctx, u, "a", base); !errors.Is(err, cart.ErrCheckoutInProgress) {
		t.Errorf("another checkout's release unfroze the cart: %v", err)
	}
	if err := r.EndCheckout(ctx, u, frozen.ID, orderID, base); err != nil {
		t.Fatal(err)
	}
	c, err := r.RemoveItem(ctx, u, "a", base)
	if err != nil || c.ID != frozen.ID || !equalQty(quantities(c), map[string]int64{"b": 2}) {
		t.Errorf("remove after release: %+v, %v", c, err)
	}
}

func cartCheckoutStaleLease(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	u := cart.User(uid("u"))
	putItems(t, r, u, never, item("a", 3))
	orderID := uid("o")
	frozen, err := r.BeginCheckout(ctx, u, orderID, base.Add(time.Second), base)
	if err != nil {
		t.Fatal(err)
	}
	later := base.Add(2 * time.Second)
	var stale *cart.StaleCheckoutError
	if _, err := r.PutItem(ctx, u, item("b", 1), never, later); !errors.As(err, &stale) || stale.CartID != frozen.ID || stale.OrderID != orderID {
		t.Fatalf("put after the lease: got %v, want StaleCheckoutError{%s, %s}", err, frozen.ID, orderID)
	}
	reopened, err := r.Reopen(ctx, u, frozen.ID, later)
	if err != nil || reopened.ID == frozen.ID || !equalQty(quantities(reopened), map[string]int64{"a": 3}) || reopened.CheckoutOrder != "" {
		t.Fatalf("reopen: %+v, %v; want a new unfrozen cart holding a=3", reopened, err)
	}
	again, err := r.Reopen(ctx, u, frozen.ID, later)
	if err != nil || again.ID != reopened.ID {
		t.Errorf("repeated reopen: %+v, %v; want the reopened cart unchanged", again, err)
	}
	// The other ending: the stale checkout did place its order.
	second, err := r.BeginCheckout(ctx, u, uid("o"), later.Add(time.Second), later)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.MarkOrdered(ctx, u, second.ID, second.CheckoutOrder, later.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	fresh, err := r.PutItem(ctx, u, item("c", 1), never, later.Add(2*time.Second))
	if err != nil || fresh.ID == second.ID || !equalQty(quantities(fresh), map[string]int64{"c": 1}) {
		t.Errorf("put after the frozen cart was ordered: %+v, %v; want a new cart with c=1", fresh, err)
	}
}

func cartCheckoutGuestAfterMerge(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	sid, userID := uid("s"), uid("u")
	putItems(t, r, cart.Guest(sid), base.Add(time.Hour), item("a", 1))
	if _, err := r.Merge(ctx, sid, userID, base); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PutItem(ctx, cart.Guest(sid), item("b", 1), base.Add(time.Hour), base); !errors.Is(err, cart.ErrGuestMerged) {
		t.Errorf("guest put after login: got %v, want ErrGuestMerged", err)
	}
}

func cartCheckoutRemovalRace(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	for i := 0; i < raceTries; i++ {
		u := cart.User(uid("u"))
		putItems(t, r, u, never, item("keep", 1), item("drop", 1))
		var frozen cart.Cart
		var ferr, rerr error
		race(func() { frozen, ferr = r.BeginCheckout(ctx, u, uid("o"), base.Add(time.Minute), base) },
			func() { _, rerr = r.RemoveItem(ctx, u, "drop", base) })
		if ferr != nil {
			t.Fatalf("try %d: begin checkout: %v", i, ferr)
		}
		ordered := quantities(frozen)["drop"] > 0
		switch {
		case rerr == nil && ordered:
			t.Fatalf("try %d: the removal was acknowledged and the checkout still holds the line", i)
		case rerr != nil && !errors.Is(rerr, cart.ErrCheckoutInProgress):
			t.Fatalf("try %d: removal failed with %v", i, rerr)
		case rerr != nil && !ordered:
			t.Fatalf("try %d: the removal was refused but the line is gone", i)
		}
	}
}

func cartCheckoutAdditionRace(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	for i := 0; i < raceTries; i++ {
		u := cart.User(uid("u"))
		putItems(t, r, u, never, item("keep", 1))
		var frozen cart.Cart
		var ferr, perr error
		race(func() { frozen, ferr = r.BeginCheckout(ctx, u, uid("o"), base.Add(time.Minute), base) },
			func() { _, perr = r.PutItem(ctx, u, item("late", 2), never, base) })
		if ferr != nil {
			t.Fatalf("try %d: begin checkout: %v", i, ferr)
		}
		in := quantities(frozen)["late"] == 2
		if perr == nil && !in || perr != nil && (in || !errors.Is(perr, cart.ErrCheckoutInProgress)) {
			t.Fatalf("try %d: put answered %v, line in the checkout: %v", i, perr, in)
		}
	}
}

func cartCheckoutMergeRace(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	for i := 0; i < raceTries; i++ {
		sid, u := uid("s"), cart.User(uid("u"))
		putItems(t, r, u, never, item("keep", 1))
		putItems(t, r, cart.Guest(sid), base.Add(time.Hour), item("guest", 3))
		var frozen cart.Cart
		var ferr, merr error
		race(func() { frozen, ferr = r.BeginCheckout(ctx, u, uid("o"), base.Add(time.Minute), base) },
			func() { _, merr = r.Merge(ctx, sid, u.UserID, base) })
		if ferr != nil {
			t.Fatalf("try %d: begin checkout: %v", i, ferr)
		}
		in := quantities(frozen)["guest"] == 3
		g, gerr := r.ActiveCart(ctx, cart.Guest(sid), base)
		guestKept := gerr == nil && quantities(g)["guest"] == 3
		if merr == nil && !in || merr != nil && (in || !guestKept || !errors.Is(merr, cart.ErrCheckoutInProgress)) {
			t.Fatalf("try %d: merge answered %v, guest line in the checkout: %v, still in the guest cart: %v", i, merr, in, guestKept)
		}
	}
}

func cartCheckoutGuestPutLoginRace(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	for i := 0; i < raceTries; i++ {
		sid, userID := uid("s"), uid("u")
		putItems(t, r, cart.Guest(sid), base.Add(time.Hour), item("first", 1))
		var merr, perr error
		race(func() { _, merr = r.Merge(ctx, sid, userID, base) },
			func() { _, perr = r.PutItem(ctx, cart.Guest(sid), item("late", 1), base.Add(time.Hour), base) })
		if merr != nil {
			t.Fatalf("try %d: merge: %v", i, merr)
		}
		uc, err := r.ActiveCart(ctx, cart.User(userID), base)
		if err != nil {
			t.Fatalf("try %d: user cart: %v", i, err)
		}
		in := quantities(uc)["late"] == 1
		if perr == nil && !in || perr != nil && (in || !errors.Is(perr, cart.ErrGuestMerged)) {
			t.Fatalf("try %d: guest put answered %v, line in the user's cart: %v", i, perr, in)
		}
	}
}

// putItems puts each item into o's cart at base, failing the test on the first refusal.
func putItems(t *testing.T, r cart.Repository, o cart.Owner, expires time.Time, items ...cart.Item) {
	t.Helper()
	for _, it := range items {
		if _, err := r.PutItem(context.Background(), o, it, expires, base); err != nil {
			t.Fatalf("put %s: %v", it.ProductID, err)
		}
	}
}

// race runs a and b at once, each started as close to the other as a barrier allows.
func race(a, b func()) {
	var start, done sync.WaitGroup
	start.Add(1)
	done.Add(2)
	for _, f := range []func(){a, b} {
		go func() {
			defer done.Done()
			start.Wait()
			f()
		}()
	}
	start.Done()
	done.Wait()
}

// CheckoutStore is a placement: carts in one backend, orders and products in another (or the
// same).
type CheckoutStore struct {
	Carts    cart.Repository
	Orders   order.Repository
	Products catalog.Repository
}

// checkoutServices is the cart and order services over s, as the API wires them.
func checkoutServices(s CheckoutStore) (*cart.Service, *order.Service) {
	cs := &cart.Service{Carts: s.Carts, Products: s.Products, Orders: s.Orders, Now: time.Now}
	return cs, &order.Service{Orders: s.Orders, Carts: cs, Now: time.Now}
}

// checkoutProducts creates n products in one category, each stocked for every race try.
func checkoutProducts(t *testing.T, s CheckoutStore, n int) []catalog.Product {
	t.Helper()
	cat := slug("c")
	out := make([]catalog.Product, n)
	for i := range out {
		out[i] = newProduct(cat, "3.00", map[string]int64{"eu": 10 * raceTries})
		mustCreate(t, s.Products, out[i])
	}
	return out
}

// Checkout runs the whole checkout (order.Service over cart.Service) on a placement while the
// cart changes, raceTries times per race: the order holds exactly the cart the user last had
// acknowledged; an acknowledged removal is never charged; an acknowledged addition is in the
// order or in the next active cart; and a stale checkout is settled through the order store.
func Checkout(t *testing.T, newStore func(t *testing.T) CheckoutStore) {
	t.Run("ORD-1 cart changes racing with placing the order", func(t *testing.T) { checkoutCartChangesRacePlacing(t, newStore) })
	t.Run("ORD-1 a checkout that outlived its lease is fenced off or finished", func(t *testing.T) { checkoutLeaseOutlived(t, newStore) })
}

func checkoutCartChangesRacePlacing(t *testing.T, newStore func(t *testing.T) CheckoutStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	cs, os := checkoutServices(s)
	ps := checkoutProducts(t, s, 3)
	keep, drop, late := ps[0], ps[1], ps[2]
	for i := 0; i < raceTries; i++ {
		u := cart.User(uid("u"))
		for _, p := range []catalog.Product{keep, drop} {
			if _, err := cs.Put(ctx, u, time.Time{}, p.ID, 1); err != nil {
				t.Fatal(err)
			}
		}
		var o order.Order
		var oerr, rerr, perr error
		race(func() { o, _, oerr = os.PlaceFromCart(ctx, u.UserID, "eu", uid("k")) },
			func() {
				_, rerr = cs.Remove(ctx, u, drop.ID)
				_, perr = cs.Put(ctx, u, time.Time{}, late.ID, 1)
			})
		if oerr != nil {
			t.Fatalf("try %d: place: %v", i, oerr)
		}
		inOrder := map[string]bool{}
		for _, it := range o.Items {
			inOrder[it.ProductID] = true
		}
		if rerr == nil && inOrder[drop.ID] {
			t.Fatalf("try %d: removal acknowledged, item still charged", i)
		}
		if rerr != nil && (!errors.Is(rerr, cart.ErrCheckoutInProgress) || !inOrder[drop.ID]) {
			t.Fatalf("try %d: removal answered %v, item in the order: %v", i, rerr, inOrder[drop.ID])
		}
		if perr == nil && !inOrder[late.ID] {
			// Not in the order: it must be in the cart the user has now.
			c, err := cs.Get(ctx, u)
			if err != nil || quantities(c)[late.ID] != 1 {
				t.Fatalf("try %d: addition acknowledged, in neither the order nor the cart (%v, %v)", i, quantities(c), err)
			}
		}
		if perr != nil && !errors.Is(perr, cart.ErrCheckoutInProgress) {
			t.Fatalf("try %d: addition answered %v", i, perr)
		}
	}
}

func checkoutLeaseOutlived(t *testing.T, newStore func(t *testing.T) CheckoutStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	cs, os := checkoutServices(s)
	p := checkoutProducts(t, s, 1)[0]
	u := cart.User(uid("u"))
	if _, err := cs.Put(ctx, u, time.Time{}, p.ID, 2); err != nil {
		t.Fatal(err)
	}
	// A checkout froze the cart and died before placing anything: once its lease is over, a
	// change fences the order store and lands in a reopened cart; the dead checkout's order
	// can then never be placed.
	now := time.Now().UTC()
	frozen, err := s.Carts.BeginCheckout(ctx, u, uid("o"), now.Add(-time.Millisecond), now.Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c, err := cs.Put(ctx, u, time.Time{}, p.ID, 5)
	if err != nil || c.ID == frozen.ID || quantities(c)[p.ID] != 5 {
		t.Fatalf("change after a dead checkout: %+v, %v; want a reopened cart with 5", c, err)
	}
	pl := order.Placement{OrderID: frozen.CheckoutOrder, UserID: u.UserID, CartID: frozen.ID, CartOwner: u.Key(),
		Zone: "eu", IdempotencyKey: uid("k"), At: now, Lines: []order.Line{{ProductID: p.ID, Category: p.Category, Quantity: 2}}}
	if _, _, err := s.Orders.Place(ctx, pl); !errors.Is(err, order.ErrCartAlreadyOrdered) {
		t.Fatalf("the dead checkout's order after the fence: got %v, want ErrCartAlreadyOrdered", err)
	}
	// A checkout that placed its order and died before the cart was marked ordered: the
	// order store says so, the cart ends as ordered, and the change starts a new cart.
	u2 := cart.User(uid("u"))
	if _, err := cs.Put(ctx, u2, time.Time{}, p.ID, 1); err != nil {
		t.Fatal(err)
	}
	now = time.Now().UTC()
	dead, err := s.Carts.BeginCheckout(ctx, u2, uid("o"), now.Add(-time.Millisecond), now.Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	pl = order.Placement{OrderID: dead.CheckoutOrder, UserID: u2.UserID, CartID: dead.ID, CartOwner: u2.Key(),
		Zone: "eu", IdempotencyKey: uid("k"), At: now, Lines: []order.Line{{ProductID: p.ID, Category: p.Category, Quantity: 1}}}
	if _, _, err := s.Orders.Place(ctx, pl); err != nil {
		t.Fatal(err)
	}
	after, err := cs.Put(ctx, u2, time.Time{}, p.ID, 4)
	if err != nil || after.ID == dead.ID || !equalQty(quantities(after), map[string]int64{p.ID: 4}) {
		t.Fatalf("change after an ordered stale checkout: %+v, %v; want a new cart with 4", after, err)
	}
	if id, err := s.Orders.FenceCart(ctx, dead.ID); err != nil || id != dead.CheckoutOrder {
		t.Errorf("fence of an ordered cart: got %q, %v; want its order %s", id, err, dead.CheckoutOrder)
	}
	if _, _, err := os.PlaceFromCart(ctx, u2.UserID, "eu", uid("k")); err != nil {
		t.Errorf("checkout of the new cart: %v", err)
	}
}
