package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/paging"
)

// ReadModel is a catalog read model (CAT-1): filled by the projector with UpsertProduct,
// read by product pages and search.
type ReadModel interface {
	UpsertProduct(ctx context.Context, p catalog.Product) error
	GetProduct(ctx context.Context, id string) (catalog.Product, error)
	SearchProducts(ctx context.Context, q catalog.Search) (paging.Page[catalog.Product], error)
}

func readModelProduct(category, price string) catalog.Product {
	return catalog.Product{ID: uid("p"), Name: "Widget " + price, Category: category, Price: money.MustParse(price),
		Attributes: map[string]string{"color": "red"}, Stock: map[string]int64{"eu": 3},
		CreatedAt: base, UpdatedAt: base}
}

// SearchAll follows the cursors of a search to the end, checking every page respects the limit.
func SearchAll(t *testing.T, c catalog.Reader, q catalog.Search) []catalog.Product {
	t.Helper()
	var got []catalog.Product
	for i := 0; ; i++ {
		page, err := c.SearchProducts(context.Background(), q)
		if err != nil {
			t.Fatalf("search page %d: %v", i, err)
		}
		if len(page.Items) > q.Page.Limit {
			t.Fatalf("page %d holds %d items, limit %d", i, len(page.Items), q.Page.Limit)
		}
		got = append(got, page.Items...)
		if page.Next == "" {
			return got
		}
		if i > 200 {
			t.Fatal("pagination does not end")
		}
		q.Page.Cursor = page.Next
	}
}

// CatalogReadModel is the read-model contract: Products' search and product-page cases on a
// model the projector fills with UpsertProduct (replays and late versions included).
func CatalogReadModel(t *testing.T, newModel func(t *testing.T) ReadModel) {
	t.Run("CAT-1 PRD-3 upsert and get, replays change nothing", func(t *testing.T) { catalogUpsertReplay(t, newModel) })
	t.Run("CAT-1 PRD-2 search by category and price range, paginated", func(t *testing.T) { catalogSearchPaginated(t, newModel) })
	t.Run("CAT-1 PRD-5 description, active flag and newest first", func(t *testing.T) { catalogNewestAndActive(t, newModel) })
	t.Run("CAT-1 price and category changes move the search row; older replays are ignored", func(t *testing.T) { catalogChangesMoveSearchRow(t, newModel) })
}

func catalogUpsertReplay(t *testing.T, newModel func(t *testing.T) ReadModel) {
	t.Parallel()
	ctx := context.Background()
	c := newModel(t)
	p := readModelProduct(uid("c"), "19.99")
	if err := c.UpsertProduct(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := c.UpsertProduct(ctx, p); err != nil { // a replay
		t.Fatal(err)
	}
	got, err := c.GetProduct(ctx, p.ID)
	if err != nil || got.Name != p.Name || got.Price != p.Price || got.Category != p.Category ||
		got.Attributes["color"] != "red" || got.Stock["eu"] != 3 || !got.CreatedAt.Equal(p.CreatedAt) {
		t.Fatalf("get: %+v, %v; want %+v", got, err, p)
	}
	if _, err := c.GetProduct(ctx, uid("missing")); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("missing: got %v, want ErrNotFound", err)
	}
}

func catalogSearchPaginated(t *testing.T, newModel func(t *testing.T) ReadModel) {
	t.Parallel()
	ctx := context.Background()
	c := newModel(t)
	cat, other := uid("c"), uid("c")
	prices := []string{"5.00", "7.50", "7.50", "7.50", "9.99", "12.00", "15.00", "20.00", "25.00", "99.00"}
	for _, pr := range prices {
		for _, cg := range []string{cat, other} {
			if err := c.UpsertProduct(ctx, readModelProduct(cg, pr)); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := SearchAll(t, c, catalog.Search{Category: cat, MinPrice: money.MustParse("7.50"), MaxPrice: money.MustParse("20.00"), Page: paging.Request{Limit: 2}})
	want := []string{"7.50", "7.50", "7.50", "9.99", "12.00", "15.00", "20.00"}
	if len(got) != len(want) {
		t.Fatalf("got %d products, want %d", len(got), len(want))
	}
	seen := map[string]bool{}
	for i, p := range got {
		if p.Price.String() != want[i] || p.Category != cat || seen[p.ID] {
			t.Errorf("item %d: %s in %s (seen before: %v), want %s in %s", i, p.Price, p.Category, seen[p.ID], want[i], cat)
		}
		seen[p.ID] = true
	}
	open, err := c.SearchProducts(ctx, catalog.Search{Category: cat, Page: paging.Request{Limit: 100}})
	if err != nil || len(open.Items) != len(prices) || open.Next != "" {
		t.Errorf("no price bounds: %d items next %q err %v, want %d", len(open.Items), open.Next, err, len(prices))
	}
	none, err := c.SearchProducts(ctx, catalog.Search{Category: uid("empty"), Page: paging.Request{Limit: 10}})
	if err != nil || len(none.Items) != 0 || none.Next != "" {
		t.Errorf("empty category: %d items, next %q, err %v", len(none.Items), none.Next, err)
	}
	if _, err := c.SearchProducts(ctx, catalog.Search{Category: cat, Page: paging.Request{Limit: 2, Cursor: "garbage!"}}); err == nil {
		t.Error("a foreign cursor was accepted")
	}
}

func catalogNewestAndActive(t *testing.T, newModel func(t *testing.T) ReadModel) {
	t.Parallel()
	ctx := context.Background()
	c := newModel(t)
	upsert := func(p catalog.Product) {
		if err := c.UpsertProduct(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	newestAndActive(t, c, upsert, func(p catalog.Product) {
		p.Inactive, p.UpdatedAt = false, p.UpdatedAt.Add(time.Second)
		upsert(p)
	})
}

func catalogChangesMoveSearchRow(t *testing.T, newModel func(t *testing.T) ReadModel) {
	t.Parallel()
	ctx := context.Background()
	c := newModel(t)
	cat, cat2 := uid("c"), uid("c")
	v1 := readModelProduct(cat, "10.00")
	if err := c.UpsertProduct(ctx, v1); err != nil {
		t.Fatal(err)
	}
	v2 := v1
	v2.Price, v2.UpdatedAt = money.MustParse("12.00"), v1.UpdatedAt.Add(time.Second)
	v3 := v2
	v3.Category, v3.UpdatedAt = cat2, v2.UpdatedAt.Add(time.Second)
	for _, v := range []catalog.Product{v2, v3, v1, v2} { // v1 and v2 replayed late
		if err := c.UpsertProduct(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := c.GetProduct(ctx, v1.ID); got.Category != cat2 || got.Price != v3.Price {
		t.Errorf("product after replays: %s %s, want %s %s", got.Category, got.Price, cat2, v3.Price)
	}
	if old := SearchAll(t, c, catalog.Search{Category: cat, Page: paging.Request{Limit: 10}}); len(old) != 0 {
		t.Errorf("old category still lists %d products", len(old))
	}
	if now := SearchAll(t, c, catalog.Search{Category: cat2, Page: paging.Request{Limit: 10}}); len(now) != 1 || now[0].Price != v3.Price {
		t.Errorf("new category lists %+v, want the product once at %s", now, v3.Price)
	}
	// A change that did not move UpdatedAt still replaces the stored version.
	v4 := v3
	v4.Price = money.MustParse("13.00")
	if err := c.UpsertProduct(ctx, v4); err != nil {
		t.Fatal(err)
	}
	if now := SearchAll(t, c, catalog.Search{Category: cat2, Page: paging.Request{Limit: 10}}); len(now) != 1 || now[0].Price != v4.Price {
		t.Errorf("same-instant change: category lists %+v, want the product once at %s", now, v4.Price)
	}
}
