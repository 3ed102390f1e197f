package httpapi

import (
	"net/http"
	"testing"
)

// PRD-5 through HTTP: description and active are fields, an inactive product is readable by
// id and in no listing, sort=newest lists newest first, bad values are problems naming them.
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
	for _, bad := range []struct{ query, field string }{
		{"category=lamps&sort=cheapest", "sort"},
		{"category=lamps&sort=newest&min_price=1.00", "min_price"},
	} {
		pr := e.must(t, http.StatusBadRequest, req{method: "GET", path: "/v1/products?" + bad.query}).problem(t)
		if len(pr.Errors) == 0 || pr.Errors[0].Field != bad.field {
			t.Errorf("%s: problem %+v, want one naming %s", bad.query, pr, bad.field)
		}
	}
}
