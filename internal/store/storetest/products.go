package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/paging"
)

// Products is the catalog contract (PRD-1..3).
func Products(t *testing.T, newRepo func(t *testing.T) catalog.Repository) {
	t.Run("PRD-3 create get and duplicate", func(t *testing.T) { productsCreateGetDuplicate(t, newRepo) })
	t.Run("create many, all or none", func(t *testing.T) { productsCreateManyAllOrNone(t, newRepo) })
	t.Run("update", func(t *testing.T) { productsUpdate(t, newRepo) })
	t.Run("PRD-2 search by category and price range, paginated", func(t *testing.T) { productsSearchPaginated(t, newRepo) })
	t.Run("PRD-5 description, active flag and newest first", func(t *testing.T) { productsNewestAndActive(t, newRepo) })
	t.Run("PRD-1 stock adjust never below zero", func(t *testing.T) { productsStockNeverBelowZero(t, newRepo) })
	t.Run("PRD-1 stock adjust never above the cap", func(t *testing.T) { productsStockNeverAboveCap(t, newRepo) })
	t.Run("PRD-1 concurrent stock decrements sell exactly the stock", func(t *testing.T) { productsConcurrentDecrements(t, newRepo) })
}

// newProduct is a product of category at price with stock per warehouse.
func newProduct(category string, price string, stock map[string]int64) catalog.Product {
	return catalog.Product{ID: uid("p"), Name: "Widget " + price, Category: category,
		Price: money.MustParse(price), Attributes: map[string]string{"color": "red"}, Stock: stock,
		CreatedAt: base, UpdatedAt: base}
}

func productsCreateGetDuplicate(t *testing.T, newRepo func(t *testing.T) catalog.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	p := newProduct(slug("c"), "19.99", map[string]int64{"eu": 5, "us": 0})
	if err := r.CreateProduct(ctx, p); err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := r.GetProduct(ctx, p.ID)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Name != p.Name || got.Category != p.Category || got.Price != p.Price ||
		got.Attributes["color"] != "red" || got.Stock["eu"] != 5 || got.Stock["us"] != 0 {
		t.Errorf("got %+v, want %+v", got, p)
	}
	sameInstant(t, "created_at", got.CreatedAt, p.CreatedAt)
	if err := r.CreateProduct(ctx, p); !errors.Is(err, catalog.ErrExists) {
		t.Errorf("second create: got %v, want ErrExists", err)
	}
	if _, err := r.GetProduct(ctx, uid("missing")); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("get missing: got %v, want ErrNotFound", err)
	}
}

func productsCreateManyAllOrNone(t *testing.T, newRepo func(t *testing.T) catalog.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	cat := slug("c")
	var ps []catalog.Product
	for range 30 {
		ps = append(ps, newProduct(cat, "5.00", map[string]int64{"eu": 3}))
	}
	if err := r.CreateProducts(ctx, ps); err != nil {
		t.Fatalf("create many: %v", err)
	}
	page, err := r.SearchProducts(ctx, catalog.Search{Category: cat, Page: paging.Request{Limit: 100}})
	if err != nil || len(page.Items) != len(ps) {
		t.Fatalf("search: got %d items, err %v; want %d", len(page.Items), err, len(ps))
	}
	if got, _ := r.GetProduct(ctx, ps[7].ID); got.Stock["eu"] != 3 || got.Name != ps[7].Name {
		t.Errorf("got %+v, want %+v", got, ps[7])
	}
	// One taken id refuses the whole call: none of the new products may appear.
	fresh := newProduct(slug("c"), "6.00", nil)
	if err := r.CreateProducts(ctx, []catalog.Product{fresh, ps[0]}); !errors.Is(err, catalog.ErrExists) {
		t.Errorf("create with a taken id: got %v, want ErrExists", err)
	}
	if _, err := r.GetProduct(ctx, fresh.ID); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("a refused batch left %s behind (err %v)", fresh.ID, err)
	}
}

func productsUpdate(t *testing.T, newRepo func(t *testing.T) catalog.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	p := newProduct(slug("c"), "10.00", map[string]int64{"eu": 1})
	mustCreate(t, r, p)
	newCat := slug("c")
	got, err := r.UpdateProduct(ctx, p.ID, func(p *catalog.Product) error {
		p.Price = money.MustParse("12.34")
		p.Name = "Renamed"
		p.Category = newCat
		return nil
	})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	if got.Price != money.MustParse("12.34") || got.Name != "Renamed" || got.Category != newCat {
		t.Errorf("update returned %+v", got)
	}
	again, _ := r.GetProduct(ctx, p.ID)
	if again.Price != got.Price || again.Category != newCat || again.Stock["eu"] != 1 {
		t.Errorf("after update read %+v; stock must survive a category change", again)
	}
	page, err := r.SearchProducts(ctx, catalog.Search{Category: newCat, Page: paging.Request{Limit: 10}})
	if err != nil || len(page.Items) != 1 {
		t.Errorf("search new category: got %d items, err %v; want 1", len(page.Items), err)
	}
	boom := errors.New("refused")
	if _, err := r.UpdateProduct(ctx, p.ID, func(*catalog.Product) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("update fn error: got %v, want it returned", err)
	}
	if _, err := r.UpdateProduct(ctx, uid("missing"), func(*catalog.Product) error { return nil }); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("update missing: got %v, want ErrNotFound", err)
	}
}

func productsSearchPaginated(t *testing.T, newRepo func(t *testing.T) catalog.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	cat := slug("c")
	other := slug("c")
	prices := []string{"5.00", "7.50", "7.50", "7.50", "9.99", "12.00", "15.00", "20.00", "25.00", "99.00"}
	for _, pr := range prices {
		mustCreate(t, r, newProduct(cat, pr, nil))
		mustCreate(t, r, newProduct(other, pr, nil))
	}
	q := catalog.Search{Category: cat, MinPrice: money.MustParse("7.50"), MaxPrice: money.MustParse("20.00"),
		Page: paging.Request{Limit: 2}}
	var got []catalog.Product
	for i := 0; ; i++ {
		page, err := r.SearchProducts(ctx, q)
		if err != nil {
			t.Fatalf("search page %d: %v", i, err)
		}
		if len(page.Items) > 2 {
			t.Fatalf("page %d has %d items, limit 2", i, len(page.Items))
		}
		got = append(got, page.Items...)
		if page.Next == "" {
			break
		}
		if i > 10 {
			t.Fatal("pagination does not end")
		}
		q.Page.Cursor = page.Next
	}
	want := []string{"7.50", "7.50", "7.50", "9.99", "12.00", "15.00", "20.00"}
	if len(got) != len(want) {
		t.Fatalf("got %d products, want %d", len(got), len(want))
	}
	seen := map[string]bool{}
	for i, p := range got {
		if p.Price.String() != want[i] || p.Category != cat {
			t.Errorf("item %d: got %s in %s, want %s in %s", i, p.Price, p.Category, want[i], cat)
		}
		if seen[p.ID] {
			t.Errorf("product %s returned twice", p.ID)
		}
		seen[p.ID] = true
	}
	open, err := r.SearchProducts(ctx, catalog.Search{Category: cat, Page: paging.Request{Limit: 100}})
	if err != nil || len(open.Items) != len(prices) || open.Next != "" {
		t.Errorf("no price bounds: got %d items next %q err %v, want %d and no next", len(open.Items), open.Next, err, len(prices))
	}
	none, err := r.SearchProducts(ctx, catalog.Search{Category: slug("empty"), Page: paging.Request{Limit: 10}})
	if err != nil || len(none.Items) != 0 || none.Next != "" {
		t.Errorf("empty category: got %d items, next %q, err %v", len(none.Items), none.Next, err)
	}
}

func productsNewestAndActive(t *testing.T, newRepo func(t *testing.T) catalog.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	newestAndActive(t, r, func(p catalog.Product) { mustCreate(t, r, p) }, func(p catalog.Product) {
		if _, err := r.UpdateProduct(ctx, p.ID, func(p *catalog.Product) error {
			p.Inactive = false
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

func productsStockNeverBelowZero(t *testing.T, newRepo func(t *testing.T) catalog.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	p := newProduct(slug("c"), "1.00", map[string]int64{"eu": 3})
	mustCreate(t, r, p)
	if n, err := r.AdjustStock(ctx, p.Ref(), "eu", -2); err != nil || n != 1 {
		t.Fatalf("take 2 of 3: got %d, %v; want 1", n, err)
	}
	var short *catalog.InsufficientStockError
	if _, err := r.AdjustStock(ctx, p.Ref(), "eu", -2); !errors.As(err, &short) || short.ProductID != p.ID || short.Available != 1 {
		t.Fatalf("take 2 of 1: got %v, want InsufficientStockError naming %s with 1 available", err, p.ID)
	}
	if n, err := r.AdjustStock(ctx, p.Ref(), "us", 7); err != nil || n != 7 {
		t.Fatalf("stock a new zone: got %d, %v; want 7", n, err)
	}
	if _, err := r.AdjustStock(ctx, catalog.Ref{ID: uid("missing"), Category: p.Category}, "eu", 1); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("adjust missing product: got %v, want ErrNotFound", err)
	}
	got, _ := r.GetProduct(ctx, p.ID)
	if got.Stock["eu"] != 1 || got.Stock["us"] != 7 {
		t.Errorf("stock after adjustments: got %v, want eu=1 us=7", got.Stock)
	}
}

func productsStockNeverAboveCap(t *testing.T, newRepo func(t *testing.T) catalog.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	p := newProduct(slug("c"), "1.00", map[string]int64{"eu": catalog.MaxStock - 5})
	mustCreate(t, r, p)
	if n, err := r.AdjustStock(ctx, p.Ref(), "eu", 5); err != nil || n != catalog.MaxStock {
		t.Fatalf("raise to the cap: got %d, %v; want %d", n, err, int64(catalog.MaxStock))
	}
	var capErr *catalog.StockCapError
	if _, err := r.AdjustStock(ctx, p.Ref(), "eu", 1); !errors.As(err, &capErr) || capErr.ProductID != p.ID || capErr.Zone != "eu" || capErr.Level != catalog.MaxStock || capErr.Delta != 1 {
		t.Fatalf("raise past the cap: got %v, want StockCapError at level %d", err, int64(catalog.MaxStock))
	}
	if _, err := r.AdjustStock(ctx, p.Ref(), "us", catalog.MaxStock+1); !errors.As(err, &capErr) || capErr.Level != 0 {
		t.Fatalf("new zone past the cap: got %v, want StockCapError at level 0", err)
	}
	if _, err := r.AdjustStock(ctx, catalog.Ref{ID: uid("missing"), Category: p.Category}, "eu", 1); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("raise a missing product: got %v, want ErrNotFound", err)
	}
	got, _ := r.GetProduct(ctx, p.ID)
	if got.Stock["eu"] != catalog.MaxStock || got.Stock["us"] != 0 {
		t.Errorf("stock after refused raises: got %v, want eu=%d and no us", got.Stock, int64(catalog.MaxStock))
	}
}

func productsConcurrentDecrements(t *testing.T, newRepo func(t *testing.T) catalog.Repository) {
	t.Parallel()
	ctx := context.Background()
	r := newRepo(t)
	p := newProduct(slug("c"), "1.00", map[string]int64{"eu": 10})
	mustCreate(t, r, p)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, short := 0, 0
	for i := 0; i < 25; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.AdjustStock(ctx, p.Ref(), "eu", -1)
			mu.Lock()
			defer mu.Unlock()
			var se *catalog.InsufficientStockError
			switch {
			case err == nil:
				ok++
			case errors.As(err, &se):
				short++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}()
	}
	wg.Wait()
	got, _ := r.GetProduct(ctx, p.ID)
	if ok != 10 || short != 15 || got.Stock["eu"] != 0 {
		t.Errorf("got %d sold, %d refused, %d left; want 10, 15, 0", ok, short, got.Stock["eu"])
	}
}

func mustCreate(t *testing.T, r catalog.Repository, p catalog.Product) {
	t.Helper()
	if err := r.CreateProduct(context.Background(), p); err != nil {
		t.Fatalf("create product %s: %v", p.ID, err)
	}
}

// newestAndActive is PRD-5 on any catalog reader: descriptions and the
// active flag are kept, inactive products are in no search, and a category lists newest first
// (created_at, then id, descending) with its own cursor. put stores a product; activate makes
// a stored one active again, as the backend's write path does.
func newestAndActive(t *testing.T, r catalog.Reader, put func(catalog.Product), activate func(catalog.Product)) {
	ctx := context.Background()
	cat := slug("c")
	var ps []catalog.Product
	for i := 0; i < 6; i++ {
		p := newProduct(cat, fmt.Sprintf("%d.00", 10-i), nil)
		p.CreatedAt = base.Add(time.Duration(i) * time.Second)
		if i == 5 {
			p.CreatedAt = ps[4].CreatedAt // a tie: id decides
		}
		p.UpdatedAt = p.CreatedAt
		p.Description = fmt.Sprintf("Описание %d", i)
		p.Inactive = i == 2
		put(p)
		ps = append(ps, p)
	}
	got, err := r.GetProduct(ctx, ps[2].ID)
	if err != nil || got.Description != ps[2].Description || !got.Inactive {
		t.Fatalf("get an inactive product: %+v, %v; want its description and inactive", got, err)
	}
	want := []catalog.Product{ps[4], ps[5], ps[3], ps[1], ps[0]}
	if ps[5].ID > ps[4].ID {
		want[0], want[1] = ps[5], ps[4]
	}
	listed := SearchAll(t, r, catalog.Search{Category: cat, Sort: catalog.SortNewest, Page: paging.Request{Limit: 2}})
	if len(listed) != len(want) {
		t.Fatalf("newest first: %d products, want %d (the inactive one left out)", len(listed), len(want))
	}
	for i := range want {
		if listed[i].ID != want[i].ID || listed[i].Description != want[i].Description || listed[i].Inactive {
			t.Errorf("newest first item %d: %s %q inactive=%v, want %s %q", i, listed[i].ID, listed[i].Description, listed[i].Inactive, want[i].ID, want[i].Description)
		}
	}
	if byPrice := SearchAll(t, r, catalog.Search{Category: cat, Page: paging.Request{Limit: 10}}); len(byPrice) != 5 {
		t.Errorf("price search lists %d products, want 5 (the inactive one left out)", len(byPrice))
	}
	pricePage, err := r.SearchProducts(ctx, catalog.Search{Category: cat, Page: paging.Request{Limit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.SearchProducts(ctx, catalog.Search{Category: cat, Sort: catalog.SortNewest, Page: paging.Request{Limit: 1, Cursor: pricePage.Next}}); err == nil {
		t.Error("a price search's cursor was accepted by a newest-first listing")
	}
	if _, err := r.SearchProducts(ctx, catalog.Search{Category: cat, Sort: catalog.SortNewest, MinPrice: 100, Page: paging.Request{Limit: 1}}); err == nil {
		t.Error("a price range with sort=newest was accepted")
	}
	activate(ps[2])
	if listed := SearchAll(t, r, catalog.Search{Category: cat, Sort: catalog.SortNewest, Page: paging.Request{Limit: 10}}); len(listed) != 6 {
		t.Errorf("after activating: %d products listed, want 6", len(listed))
	}
}
