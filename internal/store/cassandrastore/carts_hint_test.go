package cassandrastore

import (
	"context"
	"errors"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cart"
)

// otherProcess is a second shop process on the same cluster: the same session, its own
// memory of active carts.
func otherProcess(st *Store) *carts {
	return (*carts)(&Store{s: st.s, p: st.p, activeCarts: newActiveCarts()})
}

// hinted reports the cart id process r remembers for owner.
func hinted(r *carts, o cart.Owner) string {
	h, ok := r.activeCarts.Get(o.Key())
	if !ok {
		return ""
	}
	return h.id.String()
}

// A process reads a cart by the id it remembers, and every change another process made
// since (an order, a checkout, a reopened copy, a login's merge) is still seen: the
// partition's active_cart read with the cart says whether the id is still the active one.
func TestActiveCartReadByRememberedIDSeesOtherProcesses(t *testing.T) {
	st := store(t)
	a, b := otherProcess(st), otherProcess(st)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	u := cart.User(rid("u"))
	put := func(r *carts, o cart.Owner, p string, q int64) (cart.Cart, error) {
		return r.PutItem(ctx, o, cart.Item{ProductID: p, Category: "c", Quantity: q}, now.Add(time.Hour), now)
	}

	// Earlier carts behind the active one, as a returning customer has them.
	for i := 0; i < 3; i++ {
		c, err := put(b, u, "old", 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.MarkOrdered(ctx, u, c.ID, rid("o"), now); err != nil {
			t.Fatal(err)
		}
	}
	first, err := put(a, u, "x", 1)
	if err != nil {
		t.Fatal(err)
	}
	if hinted(a, u) != first.ID {
		t.Fatalf("process a remembers %q, want the cart it created %s", hinted(a, u), first.ID)
	}
	if got, err := a.loadActive(ctx, u, st.Levels().Carts, now); err != nil || got.c.ID != first.ID || !sameQty(got.c, map[string]int64{"x": 1}) {
		t.Fatalf("read by the remembered id: %+v, %v; want cart %s with x=1", got.c, err, first.ID)
	}

	// Another process freezes the cart: a's edit sees it.
	orderID := rid("o")
	if _, err := b.BeginCheckout(ctx, u, orderID, now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	if _, err := put(a, u, "y", 1); !errors.Is(err, cart.ErrCheckoutInProgress) {
		t.Fatalf("put into a cart another process froze: %v, want ErrCheckoutInProgress", err)
	}
	// ... and orders it, then a new cart starts there: a's remembered id is stale.
	if err := b.MarkOrdered(ctx, u, first.ID, orderID, now); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ActiveCart(ctx, u, now); !errors.Is(err, cart.ErrNotFound) {
		t.Fatalf("active cart after another process ordered it: %v, want ErrNotFound", err)
	}
	second, err := put(b, u, "z", 2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := put(a, u, "w", 1)
	if err != nil || got.ID != second.ID || !sameQty(got, map[string]int64{"z": 2, "w": 1}) {
		t.Fatalf("put after another process replaced the cart: %+v, %v; want cart %s with z=2 w=1", got, err, second.ID)
	}
	if hinted(a, u) != second.ID {
		t.Fatalf("process a remembers %q, want %s", hinted(a, u), second.ID)
	}

	// A stale checkout reopened by another process into a copy.
	if _, err := b.BeginCheckout(ctx, u, rid("o"), now.Add(-time.Second), now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	reopened, err := b.Reopen(ctx, u, second.ID, now)
	if err != nil || reopened.ID == second.ID {
		t.Fatalf("reopen: %+v, %v", reopened, err)
	}
	if got, err := a.RemoveItem(ctx, u, "z", now); err != nil || got.ID != reopened.ID || !sameQty(got, map[string]int64{"w": 1}) {
		t.Fatalf("remove after another process reopened the cart: %+v, %v; want cart %s with w=1", got, err, reopened.ID)
	}

	// A guest cart merged at login by another process.
	g := cart.Guest(rid("s"))
	if _, err := put(a, g, "g", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Merge(ctx, g.SessionID, rid("u"), now); err != nil {
		t.Fatal(err)
	}
	if _, err := put(a, g, "late", 1); !errors.Is(err, cart.ErrGuestMerged) {
		t.Fatalf("guest put after another process merged the cart: %v, want ErrGuestMerged", err)
	}
}

// A remembered id that names no cart of the owner (a forged or foreign id) is only a miss.
func TestActiveCartRememberedIDOfNoCart(t *testing.T) {
	st := store(t)
	r := otherProcess(st)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	u := cart.User(rid("u"))
	c, err := r.PutItem(ctx, u, cart.Item{ProductID: "p", Category: "c", Quantity: 3}, time.Time{}, now)
	if err != nil {
		t.Fatal(err)
	}
	r.activeCarts.Add(u.Key(), cartHint{id: gocql.TimeUUID()})
	got, err := r.ActiveCart(ctx, u, now)
	if err != nil || got.ID != c.ID || !sameQty(got, map[string]int64{"p": 3}) {
		t.Fatalf("active cart with a wrong remembered id: %+v, %v; want %s with p=3", got, err, c.ID)
	}
	if hinted(r, u) != c.ID {
		t.Fatalf("remembered %q after the miss, want %s", hinted(r, u), c.ID)
	}
}
