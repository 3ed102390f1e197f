package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/eventually"
)

func item(productID string, qty int64) cart.Item {
	return cart.Item{ProductID: productID, Category: "cat", Quantity: qty, AddedAt: base}
}

func quantities(c cart.Cart) map[string]int64 {
	m := map[string]int64{}
	for _, it := range c.Items {
		m[it.ProductID] = it.Quantity
	}
	return m
}

func lineQty(items []cart.Item) map[string]int64 {
	return quantities(cart.Cart{Items: items})
}

func equalQty(got, want map[string]int64) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// Carts is the cart contract (CRT-1..6, guest TTL, no lost update).
func Carts(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Run("CRT-1 CRT-3 CRT-4 put replace remove", func(t *testing.T) { cartsPutReplaceRemove(t, newRepo) })
	t.Run("CRT-2 owners never see each other's carts", func(t *testing.T) { cartsOwnersIsolated(t, newRepo) })
	t.Run("CRT-1 guest cart expires with its session", func(t *testing.T) { cartsGuestExpires(t, newRepo) })
	t.Run("expired guest carts are purged", func(t *testing.T) { cartsGuestPurged(t, newRepo) })
	t.Run("CRT-5 merge guest into user at login", func(t *testing.T) { cartsMergeAtLogin(t, newRepo) })
	t.Run("CRT-5 merge without a user cart adopts the guest items", func(t *testing.T) { cartsMergeAdoptsGuest(t, newRepo) })
	t.Run("CRT-6 ordered cart is replaced by a new one", func(t *testing.T) { cartsOrderedReplaced(t, newRepo) })
	t.Run("CRT-3 concurrent edits lose nothing", func(t *testing.T) { cartsConcurrentEdits(t, newRepo) })
	t.Run("CRT-3 cart size limit", func(t *testing.T) { cartsSizeLimit(t, newRepo) })
}

func cartsPutReplaceRemove(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	u := cart.User(uid("u"))
	if _, err := r.ActiveCart(ctx, u, base); !errors.Is(err, cart.ErrNotFound) {
		t.Fatalf("no cart yet: got %v, want ErrNotFound", err)
	}
	if _, err := r.RemoveItem(ctx, u, "p1", base); !errors.Is(err, cart.ErrNotFound) {
		t.Errorf("remove without cart: got %v, want ErrNotFound", err)
	}
	c, err := r.PutItem(ctx, u, item("p1", 2), never, base)
	if err != nil || c.ID == "" || c.Status != cart.Active || c.Owner != u {
		t.Fatalf("first put: %+v, %v", c, err)
	}
	if _, err := r.PutItem(ctx, u, item("p2", 1), never, base); err != nil {
		t.Fatal(err)
	}
	c2, err := r.PutItem(ctx, u, item("p1", 5), never, base)
	if err != nil || c2.ID != c.ID || !equalQty(quantities(c2), map[string]int64{"p1": 5, "p2": 1}) {
		t.Errorf("replace: got %v (cart %s, first %s), %v; want p1=5 p2=1 in the same cart", quantities(c2), c2.ID, c.ID, err)
	}
	c3, err := r.RemoveItem(ctx, u, "p2", base)
	if err != nil || !equalQty(quantities(c3), map[string]int64{"p1": 5}) {
		t.Errorf("remove: got %v, %v", quantities(c3), err)
	}
	if c4, err := r.RemoveItem(ctx, u, "absent", base); err != nil || !equalQty(quantities(c4), map[string]int64{"p1": 5}) {
		t.Errorf("remove absent: got %v, %v; want no change", quantities(c4), err)
	}
	got, err := r.ActiveCart(ctx, u, base)
	if err != nil || got.ID != c.ID || !equalQty(quantities(got), map[string]int64{"p1": 5}) || got.Items[0].Category != "cat" {
		t.Errorf("active cart: %+v, %v", got, err)
	}
	if !got.ExpiresAt.IsZero() {
		t.Errorf("user cart expires at %v, want never", got.ExpiresAt)
	}
}

func cartsOwnersIsolated(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	id := uid("x")
	if _, err := r.PutItem(ctx, cart.User(id), item("p1", 1), never, base); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ActiveCart(ctx, cart.Guest(id), base); !errors.Is(err, cart.ErrNotFound) {
		t.Errorf("guest with the user's id string sees a cart: %v", err)
	}
	if _, err := r.ActiveCart(ctx, cart.User(uid("y")), base); !errors.Is(err, cart.ErrNotFound) {
		t.Errorf("other user sees a cart: %v", err)
	}
}

func cartsGuestExpires(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	g := cart.Guest(uid("s"))
	exp := base.Add(time.Hour)
	c, err := r.PutItem(ctx, g, item("p1", 1), exp, base)
	if err != nil {
		t.Fatal(err)
	}
	sameInstant(t, "guest expires_at", c.ExpiresAt, exp)
	if _, err := r.ActiveCart(ctx, g, exp.Add(-time.Second)); err != nil {
		t.Errorf("before expiry: %v", err)
	}
	if _, err := r.ActiveCart(ctx, g, exp); !errors.Is(err, cart.ErrNotFound) {
		t.Errorf("at expiry: got %v, want ErrNotFound", err)
	}
}

func cartsGuestPurged(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	g := cart.Guest(uid("s"))
	start := time.Now().UTC()
	if _, err := r.PutItem(ctx, g, item("p1", 1), start.Add(time.Second), start); err != nil {
		t.Fatal(err)
	}
	// Asked as of a moment before expiry, a purged cart is gone for good, not merely hidden.
	eventually.NoError(t, purgeWithin, func() error {
		if _, err := r.PurgeExpired(ctx, time.Now().UTC()); err != nil {
			t.Fatalf("purge: %v", err)
		}
		if _, err := r.ActiveCart(ctx, g, start); !errors.Is(err, cart.ErrNotFound) {
			return fmt.Errorf("expired cart still stored after a purge: %v", err)
		}
		return nil
	})
}

func cartsMergeAtLogin(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	sid, userID := uid("s"), uid("u")
	g, u := cart.Guest(sid), cart.User(userID)
	for _, it := range []cart.Item{item("a", 2), item("b", 1), item("big", 990)} {
		if _, err := r.PutItem(ctx, g, it, base.Add(time.Hour), base); err != nil {
			t.Fatal(err)
		}
	}
	for _, it := range []cart.Item{item("a", 3), item("c", 1), item("big", 20)} {
		if _, err := r.PutItem(ctx, u, it, never, base); err != nil {
			t.Fatal(err)
		}
	}
	userCart, _ := r.ActiveCart(ctx, u, base)
	res, err := r.Merge(ctx, sid, userID, base)
	merged := res.Cart
	want := map[string]int64{"a": 5, "b": 1, "c": 1, "big": cart.MaxQuantity}
	if err != nil || merged.ID != userCart.ID || !equalQty(quantities(merged), want) {
		t.Fatalf("merge: got %v in %s, %v; want %v in the user's cart %s", quantities(merged), merged.ID, err, want, userCart.ID)
	}
	if !equalQty(lineQty(res.NotMerged), map[string]int64{"big": 11}) {
		t.Errorf("not merged: got %v, want the 11 of big past the line cap", res.NotMerged)
	}
	if _, err := r.ActiveCart(ctx, g, base); !errors.Is(err, cart.ErrNotFound) {
		t.Errorf("guest cart still active after merge: %v", err)
	}
	again, err := r.Merge(ctx, sid, userID, base)
	if err != nil || !equalQty(quantities(again.Cart), want) || len(again.NotMerged) != 0 {
		t.Errorf("repeated login: got %v, %v; want no change %v", quantities(again.Cart), err, want)
	}
}

func cartsMergeAdoptsGuest(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	sid, userID := uid("s"), uid("u")
	if _, err := r.PutItem(ctx, cart.Guest(sid), item("a", 2), base.Add(time.Hour), base); err != nil {
		t.Fatal(err)
	}
	res, err := r.Merge(ctx, sid, userID, base)
	merged := res.Cart
	if err != nil || merged.Owner != cart.User(userID) || !equalQty(quantities(merged), map[string]int64{"a": 2}) || !merged.ExpiresAt.IsZero() {
		t.Errorf("merge into nothing: %+v, %v", merged, err)
	}
	if _, err := r.Merge(ctx, uid("s"), uid("u"), base); !errors.Is(err, cart.ErrNotFound) {
		t.Errorf("merge of two empty owners: got %v, want ErrNotFound", err)
	}
}

func cartsOrderedReplaced(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	u := cart.User(uid("u"))
	c, err := r.PutItem(ctx, u, item("a", 1), never, base)
	if err != nil {
		t.Fatal(err)
	}
	oid := uid("o")
	if err := r.MarkOrdered(ctx, u, c.ID, oid, base); err != nil {
		t.Fatalf("mark ordered: %v", err)
	}
	if err := r.MarkOrdered(ctx, u, c.ID, oid, base); err != nil {
		t.Errorf("mark ordered twice: %v, want idempotent success", err)
	}
	if _, err := r.ActiveCart(ctx, u, base); !errors.Is(err, cart.ErrNotFound) {
		t.Errorf("ordered cart still active: %v", err)
	}
	next, err := r.PutItem(ctx, u, item("b", 1), never, base)
	if err != nil || next.ID == c.ID || !equalQty(quantities(next), map[string]int64{"b": 1}) {
		t.Errorf("new cart after order: %+v, %v; want a fresh cart holding only b", next, err)
	}
}

func cartsConcurrentEdits(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	u := cart.User(uid("u"))
	const n = 20
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := r.PutItem(ctx, u, item(string(rune('a'+i)), int64(i+1)), never, base); err != nil {
				t.Errorf("put %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	got, err := r.ActiveCart(ctx, u, base)
	if err != nil || len(got.Items) != n {
		t.Fatalf("after %d concurrent puts: %d items, %v", n, len(got.Items), err)
	}
	for i := 0; i < n; i++ {
		if q := quantities(got)[string(rune('a'+i))]; q != int64(i+1) {
			t.Errorf("item %d: quantity %d, want %d", i, q, i+1)
		}
	}
}

func cartsSizeLimit(t *testing.T, newRepo func(t *testing.T) cart.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	u := cart.User(uid("u"))
	for i := 0; i < cart.MaxItems; i++ {
		if _, err := r.PutItem(ctx, u, item(uid("p"), 1), never, base); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if _, err := r.PutItem(ctx, u, item(uid("p"), 1), never, base); !errors.Is(err, cart.ErrTooManyItems) {
		t.Errorf("put past the limit: got %v, want ErrTooManyItems", err)
	}
	got, _ := r.ActiveCart(ctx, u, base)
	if len(got.Items) != cart.MaxItems {
		t.Errorf("cart holds %d items, want %d", len(got.Items), cart.MaxItems)
	}
}
