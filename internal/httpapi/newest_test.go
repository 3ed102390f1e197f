package httpapi

import (
	"net/http"
	"testing"
)

// PRD-5 through HTTP: description and active are fields, an inactive product is readable by
// id and in no listing, sort=newest lists newest first (within a price range if one is given),
// bad values are problems naming them.
func TestProductsNewestAndActive(t *testing.T) {
	e := newEnv(t)
	e.product(t, "old-1", "lamps", "10.00", 1)
	e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/products", admin: testAdminToken,
		body: map[string]any{"id": "new-1", "name": "New lamp", "description": "Лампа", "category": "lamps", "price": "20.00"}})
	e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/products", admin: testAdminToken,
		body: map[string]any{"id": "off-1", "name": "Hidden lamp", "category": "lamps", "price": "5.00", "active": false}})
	var p productView
	e.must(t, http.StatusOK, req{method: "GET", path: "/v1/products/off-1"}).json(t, &p)
	if p.Active {
		t.Errorf("off-1 reads active")
	}
	var list listView[productView]
	e.must(t, http.StatusOK, req{method: "GET", path: "/v1/products?category=lamps&sort=newest"}).json(t, &list)
	if len(list.Items) != 2 || list.Items[0].ID != "new-1" || list.Items[0].Description != "Лампа" || !list.Items[0].Active {
		t.Fatalf("newest first: %+v, want new-1 (with its description) then old-1, off-1 left out", list.Items)
	}
	e.must(t, http.StatusOK, req{method: "GET", path: "/v1/products?category=lamps"}).json(t, &list)
	if len(list.Items) != 2 {
		t.Errorf("by price: %d items, want 2 (off-1 left out)", len(list.Items))
	}
	// Not on sale: a cart refuses it, naming the product; once reactivated it is accepted.
	token, _ := e.user(t)
	pr := e.must(t, http.StatusConflict, req{method: "PUT", path: "/v1/cart/items/off-1", token: token, body: map[string]int64{"quantity": 1}}).problem(t)
	if len(pr.Errors) == 0 || pr.Errors[0].Field != "product_id" {
		t.Errorf("inactive product into a cart: %+v, want a problem naming product_id", pr)
	}
	e.must(t, http.StatusOK, req{method: "PATCH", path: "/v1/products/off-1", admin: testAdminToken, body: map[string]any{"active": true}})
	e.must(t, http.StatusOK, req{method: "PUT", path: "/v1/cart/items/off-1", token: token, body: map[string]int64{"quantity": 1}})
	// A price range filters the newest-first listing, a page at a time; an upper bound below
	// the lower finds nothing, with either sort.
	search := func(query string) listView[productView] {
		var l listView[productView] // fresh: next_cursor is absent on a last page
		e.must(t, http.StatusOK, req{method: "GET", path: "/v1/products?category=lamps&" + query}).json(t, &l)
		return l
	}
	var ids []string
	cursor := ""
	for range 3 {
		list := search("sort=newest&min_price=6&limit=1&cursor=" + cursor)
		for _, it := range list.Items {
			ids = append(ids, it.ID)
		}
		if cursor = list.NextCursor; cursor == "" {
			break
		}
	}
	if len(ids) != 2 || ids[0] != "new-1" || ids[1] != "old-1" || cursor != "" {
		t.Errorf("newest from 6.00, one per page: %v (cursor %q), want [new-1 old-1] and no further page", ids, cursor)
	}
	if list := search("sort=newest&min_price=6&max_price=15"); len(list.Items) != 1 || list.Items[0].ID != "old-1" || list.NextCursor != "" {
		t.Errorf("newest from 6.00 to 15.00: %+v, want old-1 alone", list)
	}
	for _, sort := range []string{"price", "newest"} {
		if list := search("min_price=15&max_price=6&sort=" + sort); len(list.Items) != 0 || list.NextCursor != "" {
			t.Errorf("sort=%s from 15.00 to 6.00: %+v, want nothing", sort, list)
		}
	}
	for _, bad := range []struct{ query, field string }{
		{"category=lamps&sort=cheapest", "sort"},
		{"category=lamps&sort=newest&min_price=1.5x", "min_price"},
	} {
		pr := e.must(t, http.StatusBadRequest, req{method: "GET", path: "/v1/products?" + bad.query}).problem(t)
		if len(pr.Errors) == 0 || pr.Errors[0].Field != bad.field {
			t.Errorf("%s: problem %+v, want one naming %s", bad.query, pr, bad.field)
		}
	}
}
