package httpapi

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
)

// gatedCatalog holds every product read until want reads are in flight together (or the
// test's patience runs out), and fails the products named in fail.
type gatedCatalog struct {
	CatalogReader
	want int
	fail map[string]error

	mu       sync.Mutex
	inFlight int
	all      chan struct{}
	alone    bool // a read gave up waiting for the others
}

func (g *gatedCatalog) GetProduct(ctx context.Context, id string) (catalog.Product, error) {
	g.mu.Lock()
	if g.inFlight++; g.inFlight == g.want {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-time.After(5 * time.Second): // read one after another: the gate never opens
		g.mu.Lock()
		g.alone = true
		g.mu.Unlock()
	}
	if err := g.fail[id]; err != nil {
		return catalog.Product{}, err
	}
	return g.CatalogReader.GetProduct(ctx, id)
}

// guestCartOfFour is a guest's cart of two each of four products, p1 to p4, priced 1.00 to 4.25.
func guestCartOfFour(t *testing.T) (*env, cart.Cart, []string) {
	t.Helper()
	e := newEnv(t)
	ids := []string{"p1", "p2", "p3", "p4"}
	for i, id := range ids {
		e.product(t, id, "books", []string{"1.00", "2.50", "3.00", "4.25"}[i], 10)
	}
	token := e.guest(t)
	for _, id := range ids {
		e.put(t, token, id, 2)
	}
	sess, err := e.services.Sessions.Authenticate(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.services.Carts.Get(context.Background(), cart.Guest(sess.ID))
	if err != nil || len(c.Items) != len(ids) {
		t.Fatalf("cart %+v, %v: want %d lines", c, err, len(ids))
	}
	return e, c, ids
}

// TestCartViewReadsLinesTogether: a cart's lines are priced by concurrent catalog reads, and
// the view keeps the cart's order and answers the first failed line's error, as in sequence.
func TestCartViewReadsLinesTogether(t *testing.T) {
	e, c, ids := guestCartOfFour(t)
	ctx := context.Background()
	// p4 leaves the catalog: its line stays, unavailable and out of the subtotal.
	notFound := map[string]error{c.Items[3].ProductID: catalog.ErrNotFound}
	gate := &gatedCatalog{CatalogReader: e.services.Catalog, want: len(ids), fail: notFound, all: make(chan struct{})}
	s := &server{Deps: Deps{Services: Services{Catalog: gate}}}
	v, err := s.viewCart(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if gate.alone {
		t.Error("a line's read waited in vain for the others: the lines were not read together")
	}
	var sum int64
	for i, line := range v.Items {
		if line.ProductID != c.Items[i].ProductID {
			t.Errorf("line %d is %s, want the cart's %s", i, line.ProductID, c.Items[i].ProductID)
		}
		if want := i < 3; line.Available != want {
			t.Errorf("line %s available %v, want %v", line.ProductID, line.Available, want)
		}
		if line.Available {
			sum += int64(*line.LineTotal)
		}
	}
	if int64(v.Subtotal) != sum || sum == 0 {
		t.Errorf("subtotal %v, lines sum to %v", v.Subtotal, sum)
	}

	// Two lines fail: the error names the first of them in cart order.
	first, second := c.Items[1].ProductID, c.Items[2].ProductID
	gate = &gatedCatalog{CatalogReader: e.services.Catalog, want: len(ids), all: make(chan struct{}),
		fail: map[string]error{first: errors.New("node down"), second: errors.New("timeout")}}
	s.Catalog = gate
	_, err = s.viewCart(ctx, c)
	if err == nil || !strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), "node down") {
		t.Errorf("error %v, want line %s's", err, first)
	}
}

// heldCards is a card cache holding the cards given.
type heldCards map[string]catalog.Product

func (h heldCards) Card(id string) (catalog.Product, bool) {
	p, ok := h[id]
	return p, ok
}

// TestCartViewPricesHeldLinesFromTheCards: lines the card cache holds are priced from their
// cards without a catalog read; the others are read, together, as before.
func TestCartViewPricesHeldLinesFromTheCards(t *testing.T) {
	e, c, _ := guestCartOfFour(t)
	ctx := context.Background()
	// The cards say otherwise than the catalog, so the answer shows where each price came from.
	held := heldCards{}
	for _, i := range []int{0, 2} {
		p, err := e.services.Catalog.GetProduct(ctx, c.Items[i].ProductID)
		if err != nil {
			t.Fatal(err)
		}
		p.Name, p.Price = "card "+p.ID, money.MustParse("9.99")
		held[p.ID] = p
	}
	gate := &gatedCatalog{CatalogReader: e.services.Catalog, want: 2, all: make(chan struct{})}
	s := &server{Deps: Deps{Services: Services{Catalog: gate, Cards: held}}}
	v, err := s.viewCart(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if gate.inFlight != 2 || gate.alone {
		t.Errorf("%d catalog reads (alone %v), want the 2 lines the cards lack, read together", gate.inFlight, gate.alone)
	}
	var sum int64
	for i, line := range v.Items {
		card, isHeld := held[line.ProductID]
		switch {
		case line.ProductID != c.Items[i].ProductID:
			t.Errorf("line %d is %s, want the cart's %s", i, line.ProductID, c.Items[i].ProductID)
		case isHeld && (line.Name != card.Name || *line.UnitPrice != card.Price):
			t.Errorf("line %s: %s at %v, want the card's %s at %v", line.ProductID, line.Name, line.UnitPrice, card.Name, card.Price)
		case !isHeld && *line.UnitPrice == money.MustParse("9.99"):
			t.Errorf("line %s priced from a card it has none", line.ProductID)
		}
		sum += int64(*line.LineTotal)
	}
	if int64(v.Subtotal) != sum {
		t.Errorf("subtotal %v, lines sum to %v", v.Subtotal, sum)
	}
}
