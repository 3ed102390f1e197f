package storetest

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/projection"
)

// CachedSearchStore is a catalog as a placement serves it: writes and orders to the store of
// record (with its outbox), search from Reader (the store itself, or a read model Sink feeds).
type CachedSearchStore struct {
	Orders OrderStore
	Reader catalog.Reader
	Sink   projection.CatalogSink // nil when Reader is the store of record
}

// cachedSearch is one case's cache and the projector that keeps it (and Sink) current.
type cachedSearch struct {
	CachedSearchStore
	cache *catalog.CardCache
	proj  *outbox.Projector
}

func newCachedSearch(t *testing.T, s CachedSearchStore, maxCards int) *cachedSearch {
	t.Helper()
	ctx := context.Background()
	consumer := uid("cards")
	// Start after everything already in a shared outbox: this case projects its own writes.
	for _, part := range outbox.Parts(s.Orders.Outbox) {
		last, err := part.LastSeq(ctx)
		if err == nil {
			err = part.SaveCheckpoint(ctx, consumer, last)
		}
		if err != nil {
			t.Fatalf("outbox checkpoint: %v", err)
		}
	}
	c := &cachedSearch{CachedSearchStore: s, cache: catalog.NewCardCache(s.Reader, maxCards),
		proj: outbox.NewProjector(s.Orders.Outbox, consumer, nil)}
	if s.Sink != nil {
		projection.RegisterCatalog(c.proj, s.Sink, s.Orders.Products)
	}
	projection.RegisterCards(c.proj, c.cache)
	return c
}

func (c *cachedSearch) drain(t *testing.T) {
	t.Helper()
	if _, err := c.proj.Drain(context.Background()); err != nil {
		t.Fatalf("projector: %v", err)
	}
}

// create writes products to the store of record and projects them.
func (c *cachedSearch) create(t *testing.T, ps ...catalog.Product) {
	t.Helper()
	for _, p := range ps {
		mustCreate(t, c.Orders.Products, p)
	}
	c.drain(t)
}

// same checks the cached search of a whole category equals the Reader's, card for card.
func (c *cachedSearch) same(t *testing.T, category string, limit int) []catalog.Product {
	t.Helper()
	q := catalog.Search{Category: category, Page: paging.Request{Limit: limit}}
	got, want := SearchAll(t, c.cache, q), SearchAll(t, c.Reader, q)
	if len(got) != len(want) {
		t.Fatalf("category %s: cached search lists %d products, the reader %d", category, len(got), len(want))
	}
	for i := range got {
		if !sameCard(got[i], want[i]) {
			t.Fatalf("category %s item %d: cached %+v, reader %+v", category, i, got[i], want[i])
		}
	}
	return got
}

// card checks the cache's keyed lookup (a cart answer's prices): ok as wanted and, when
// served, the card search serves.
func (c *cachedSearch) card(t *testing.T, id string, wantOK bool, want catalog.Product) {
	t.Helper()
	got, ok := c.cache.Card(id)
	if ok != wantOK {
		t.Fatalf("Card(%s): ok %v, want %v", id, ok, wantOK)
	}
	if ok && !sameCard(got, want) {
		t.Fatalf("Card(%s) = %+v, want %+v", id, got, want)
	}
}

func sameCard(a, b catalog.Product) bool {
	return a.ID == b.ID && a.Name == b.Name && a.Category == b.Category && a.Price == b.Price &&
		reflect.DeepEqual(nonNil(a.Stock), nonNil(b.Stock)) && a.CreatedAt.Equal(b.CreatedAt)
}

func nonNil(m map[string]int64) map[string]int64 {
	if m == nil {
		return map[string]int64{}
	}
	return m
}

func find(ps []catalog.Product, id string) (catalog.Product, bool) {
	for _, p := range ps {
		if p.ID == id {
			return p, true
		}
	}
	return catalog.Product{}, false
}

// CachedSearch is the card cache's contract over a backend (CAT-2): every change reaches the
// next search once the projector has run, the cached search always equals the reader's after
// that, and memory stays within the bound.
func CachedSearch(t *testing.T, newStore func(t *testing.T) CachedSearchStore) {
	t.Run("CAT-2 price, stock and orders are visible to the next search after the projector", func(t *testing.T) { cachedSearchVisibleAfterProjector(t, newStore) })
	t.Run("CAT-2 new products and category moves after the projector", func(t *testing.T) { cachedSearchNewAndMovedProducts(t, newStore) })
	t.Run("CAT-2 price ranges and cursors as the reader's", func(t *testing.T) { cachedSearchRangesAndCursors(t, newStore) })
	t.Run("CAT-2 memory stays within the bound", func(t *testing.T) { cachedSearchMemoryBound(t, newStore) })
	t.Run("CAT-2 searches during writes, then equal to the reader", func(t *testing.T) { cachedSearchDuringWrites(t, newStore) })
}

func cachedSearchVisibleAfterProjector(t *testing.T, newStore func(t *testing.T) CachedSearchStore) {
	t.Parallel()
	ctx := context.Background()
	c := newCachedSearch(t, newStore(t), 0)
	cat := slug("c")
	a := newProduct(cat, "10.00", map[string]int64{"eu": 5})
	b := newProduct(cat, "20.00", map[string]int64{"eu": 5})
	c.create(t, a, b)
	c.card(t, a.ID, false, a) // no search has loaded the category yet
	got := c.same(t, cat, 10)
	if got[0].ID != a.ID { // warms the cache
		t.Fatalf("first card %s, want %s", got[0].ID, a.ID)
	}
	c.card(t, a.ID, true, got[0])
	if _, err := c.Orders.Products.UpdateProduct(ctx, a.ID, func(p *catalog.Product) error {
		p.Price, p.UpdatedAt = money.MustParse("25.00"), base.Add(time.Second)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.drain(t)
	c.card(t, a.ID, false, a) // changed: the old price is never served, the reader answers
	c.card(t, b.ID, true, got[1])
	if got := c.same(t, cat, 10); got[1].ID != a.ID || got[1].Price != money.MustParse("25.00") {
		t.Fatalf("after a price change: %+v, want %s second at 25.00", got, a.ID)
	} else {
		c.card(t, a.ID, true, got[1])
	}
	if _, err := c.Orders.Products.AdjustStock(ctx, b.Ref(), "eu", 7); err != nil {
		t.Fatal(err)
	}
	c.drain(t)
	if got, _ := find(c.same(t, cat, 10), b.ID); got.Stock["eu"] != 12 {
		t.Fatalf("after a stock adjustment: eu=%d, want 12", got.Stock["eu"])
	}
	if _, _, err := c.Orders.Orders.Place(ctx, placement(uid("u"), "eu", line(a, 2), line(b, 3))); err != nil {
		t.Fatal(err)
	}
	c.drain(t)
	got = c.same(t, cat, 10)
	if pa, _ := find(got, a.ID); pa.Stock["eu"] != 3 {
		t.Errorf("after an order: %s eu=%d, want 3", a.ID, pa.Stock["eu"])
	}
	if pb, _ := find(got, b.ID); pb.Stock["eu"] != 9 {
		t.Errorf("after an order: %s eu=%d, want 9", b.ID, pb.Stock["eu"])
	}
	if _, err := c.Orders.Products.UpdateProduct(ctx, b.ID, func(p *catalog.Product) error {
		p.Inactive = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.drain(t)
	if got := c.same(t, cat, 10); len(got) != 1 {
		t.Errorf("after deactivating one of two: %d listed, want 1", len(got))
	}
	c.card(t, b.ID, false, b) // not searchable: the reader answers for it
}

func cachedSearchNewAndMovedProducts(t *testing.T, newStore func(t *testing.T) CachedSearchStore) {
	t.Parallel()
	ctx := context.Background()
	c := newCachedSearch(t, newStore(t), 0)
	cat, cat2 := slug("c"), slug("c")
	a := newProduct(cat, "10.00", nil)
	c.create(t, a, newProduct(cat2, "5.00", nil))
	c.same(t, cat, 10)
	c.same(t, cat2, 10)
	n := newProduct(cat, "1.00", nil)
	c.create(t, n)
	if got := c.same(t, cat, 10); len(got) != 2 || got[0].ID != n.ID {
		t.Fatalf("after a creation: %+v, want %s first", got, n.ID)
	}
	if _, err := c.Orders.Products.UpdateProduct(ctx, a.ID, func(p *catalog.Product) error {
		p.Category, p.UpdatedAt = cat2, base.Add(time.Second)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c.drain(t)
	c.card(t, a.ID, false, a)
	if got := c.same(t, cat, 10); len(got) != 1 {
		t.Errorf("old category after a move: %d products, want 1", len(got))
	}
	if got := c.same(t, cat2, 10); len(got) != 2 || got[1].ID != a.ID {
		t.Errorf("new category after a move: %+v, want %s second", got, a.ID)
	} else {
		c.card(t, a.ID, true, got[1])
	}
}

func cachedSearchRangesAndCursors(t *testing.T, newStore func(t *testing.T) CachedSearchStore) {
	t.Parallel()
	ctx := context.Background()
	c := newCachedSearch(t, newStore(t), 0)
	cat := slug("c")
	for _, pr := range []string{"5.00", "7.50", "7.50", "7.50", "9.99", "12.00", "15.00", "20.00", "25.00", "99.00"} {
		c.create(t, newProduct(cat, pr, nil))
	}
	q := catalog.Search{Category: cat, MinPrice: money.MustParse("7.50"), MaxPrice: money.MustParse("20.00"), Page: paging.Request{Limit: 2}}
	got, want := SearchAll(t, c.cache, q), SearchAll(t, c.Reader, q)
	if len(got) != 7 || len(got) != len(want) {
		t.Fatalf("cached %d products, reader %d, want 7", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID {
			t.Errorf("item %d: cached %s, reader %s", i, got[i].ID, want[i].ID)
		}
	}
	// A page from the cache continues through the reader and back (a cursor is a cursor).
	first, err := c.cache.SearchProducts(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	q.Page.Cursor = first.Next
	second, err := c.Reader.SearchProducts(ctx, q)
	if err != nil || len(second.Items) != 2 || second.Items[0].ID != want[2].ID {
		t.Errorf("reader after a cached page: %+v, %v; want %s first", second.Items, err, want[2].ID)
	}
	if _, err := c.cache.SearchProducts(ctx, catalog.Search{Category: cat, Page: paging.Request{Limit: 2, Cursor: "garbage!"}}); err == nil {
		t.Error("a foreign cursor was accepted")
	}
}

func cachedSearchMemoryBound(t *testing.T, newStore func(t *testing.T) CachedSearchStore) {
	t.Parallel()
	c := newCachedSearch(t, newStore(t), 8)
	var cats []string
	for i := 0; i < 4; i++ {
		cat := slug("c")
		cats = append(cats, cat)
		for j := 0; j < 3; j++ {
			c.create(t, newProduct(cat, fmt.Sprintf("%d.00", j+1), nil))
		}
	}
	big := slug("c")
	for j := 0; j < 12; j++ {
		c.create(t, newProduct(big, fmt.Sprintf("%d.00", j+1), nil))
	}
	for round := 0; round < 2; round++ {
		for _, cat := range append(cats, big) {
			c.same(t, cat, 5)
			if st := c.cache.Stats(); st.Cards+st.Categories > 8 {
				t.Fatalf("cache holds %d cards in %d categories, bound 8", st.Cards, st.Categories)
			}
		}
	}
}

func cachedSearchDuringWrites(t *testing.T, newStore func(t *testing.T) CachedSearchStore) {
	t.Parallel()
	ctx := context.Background()
	c := newCachedSearch(t, newStore(t), 0)
	cat := slug("c")
	var ps []catalog.Product
	for i := 0; i < 6; i++ {
		p := newProduct(cat, fmt.Sprintf("%d.00", 10+i), map[string]int64{"eu": 100})
		ps = append(ps, p)
	}
	c.create(t, ps...)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.cache.SearchProducts(ctx, catalog.Search{Category: cat, Page: paging.Request{Limit: 3}}); err != nil {
					t.Errorf("search during writes: %v", err)
					return
				}
			}
		}()
	}
	for i := 0; i < 12; i++ {
		p := ps[i%len(ps)]
		if _, err := c.Orders.Products.UpdateProduct(ctx, p.ID, func(p *catalog.Product) error {
			p.Price, p.UpdatedAt = money.Amount(500+int64(i)*137%2000), base.Add(time.Duration(i+1)*time.Second)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Orders.Orders.Place(ctx, placement(uid("u"), "eu", order.Line{ProductID: p.ID, Category: cat, Quantity: 1})); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			c.drain(t)
		}
	}
	close(stop)
	wg.Wait()
	c.drain(t)
	c.same(t, cat, 4)
}
