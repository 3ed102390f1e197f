package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestProblems checks the problem+json shape and the field named for each error class.
func TestProblems(t *testing.T) {
	e := newEnv(t)
	e.product(t, "p1", "toys", "2.00", 1)
	guest := e.guest(t)
	userTok, _ := e.user(t)
	cases := []struct {
		name   string
		q      req
		status int
		typ    string
		field  string
	}{
		{"malformed JSON", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"quantity": 1,`}, 400, "malformed-json", "body"},
		{"syntax error", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"quantity" 1}`}, 400, "malformed-json", "quantity"},
		{"unknown field", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"quantity": 1, "qty": 2}`}, 400, "malformed-json", "qty"},
		{"wrong type", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"quantity": "1"}`}, 400, "malformed-json", "quantity"},
		{"float quantity", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"quantity": 1.5}`}, 400, "malformed-json", "quantity"},
		{"trailing data", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"quantity": 1} {}`}, 400, "malformed-json", "body"},
		{"empty body", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: ``}, 400, "malformed-json", "body"},
		{"array body", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `[1]`}, 400, "malformed-json", "body"},
		{"quantity range", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"quantity": 1000}`}, 400, "validation", "quantity"},
		// Strict decoding: a gateway and this server must read a body alike.
		{"duplicate member", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"quantity": 1, "quantity": 2}`}, 400, "malformed-json", "quantity"},
		{"duplicate map key", req{method: "POST", path: "/v1/products", admin: testAdminToken, body: `{"name": "x", "category": "toys", "price": "1", "stock": {"eu": 1, "eu": 5}}`}, 400, "malformed-json", "stock.eu"},
		{"mis-cased member", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"Quantity": 1}`}, 400, "malformed-json", "Quantity"},
		{"invalid UTF-8", req{method: "POST", path: "/v1/events", token: guest, body: "{\"type\": \"view\", \"product_id\": \"p\xff1\"}"}, 400, "malformed-json", "product_id"},
		{"lone surrogate", req{method: "POST", path: "/v1/events", token: guest, body: `{"type": "view", "product_id": "p\ud8001"}`}, 400, "malformed-json", "product_id"},
		{"null body", req{method: "PATCH", path: "/v1/products/p1", admin: testAdminToken, body: `null`}, 400, "malformed-json", "body"},
		{"null member", req{method: "PATCH", path: "/v1/products/p1", admin: testAdminToken, body: `{"name": null}`}, 400, "malformed-json", "name"},
		{"fractional quantity", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"quantity": 63.5}`}, 400, "malformed-json", "quantity"},
		{"empty product id", req{method: "POST", path: "/v1/products", admin: testAdminToken, body: `{"id": "", "name": "x", "category": "toys", "price": "1"}`}, 400, "validation", "id"},
		{"zero price", req{method: "POST", path: "/v1/products", admin: testAdminToken, body: `{"name": "x", "category": "toys", "price": "0.00"}`}, 400, "validation", "price"},
		{"patch of a missing product, bad name", req{method: "PATCH", path: "/v1/products/nope", admin: testAdminToken, body: `{"name": ""}`}, 400, "validation", "name"},
		{"duplicate query parameter", req{method: "GET", path: "/v1/products?category=toys&limit=1&limit=200"}, 400, "validation", "limit"},
		{"impossible order id", req{method: "GET", path: "/v1/orders/a.b", token: userTok}, 400, "validation", "id"},
		{"login without a password", req{method: "POST", path: "/v1/login", token: guest, body: `{"email": "a@example.com"}`}, 400, "validation", "password"},
		{"unknown product", req{method: "PUT", path: "/v1/cart/items/nope", token: guest, body: `{"quantity": 1}`}, 404, "not-found", "product_id"},
		{"too large", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"quantity": 1, "x": "` + strings.Repeat("a", MaxBodyBytes) + `"}`}, 413, "body-too-large", ""},
		{"wrong content type", req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"quantity": 1}`, header: map[string]string{"Content-Type": "text/plain"}}, 415, "unsupported-media-type", ""},
		{"price as number", req{method: "POST", path: "/v1/products", admin: testAdminToken, body: `{"name": "x", "category": "toys", "price": 1.5}`}, 400, "malformed-json", "price"},
		{"price syntax", req{method: "POST", path: "/v1/products", admin: testAdminToken, body: `{"name": "x", "category": "toys", "price": "1.555"}`}, 400, "validation", "price"},
		{"bad category", req{method: "POST", path: "/v1/products", admin: testAdminToken, body: `{"name": "x", "category": "Toys!", "price": "1"}`}, 400, "validation", "category"},
		{"search without category", req{method: "GET", path: "/v1/products"}, 400, "validation", "category"},
		{"search limit", req{method: "GET", path: "/v1/products?category=toys&limit=101"}, 400, "validation", "limit"},
		{"search min_price", req{method: "GET", path: "/v1/products?category=toys&min_price=1e3"}, 400, "validation", "min_price"},
		{"bad cursor", req{method: "GET", path: "/v1/products?category=toys&cursor=%21%21"}, 400, "validation", "cursor"},
		{"history limit", req{method: "GET", path: "/v1/orders?limit=0", token: userTok}, 400, "validation", "limit"},
		{"events date", req{method: "GET", path: "/v1/events?date=2026-13-01", token: guest}, 400, "validation", "date"},
		{"events type", req{method: "GET", path: "/v1/events?type=buy", token: guest}, 400, "validation", "type"},
		{"event type", req{method: "POST", path: "/v1/events", token: guest, body: `{"type": "buy"}`}, 400, "validation", "type"},
		{"missing idempotency key", req{method: "POST", path: "/v1/orders", token: userTok, body: `{"zone": "eu"}`}, 400, "validation", "Idempotency-Key"},
		{"bad zone", req{method: "POST", path: "/v1/orders", token: userTok, body: `{"zone": "EU WEST"}`, header: map[string]string{IdempotencyKeyHeader: "k"}}, 400, "validation", "zone"},
		{"bad status", req{method: "POST", path: "/v1/orders/x/status", admin: testAdminToken, body: `{"status": "lost"}`}, 400, "validation", "status"},
		{"bad email", req{method: "POST", path: "/v1/users", token: guest, body: `{"email": "nope", "password": "password123"}`}, 400, "validation", "email"},
		{"short password", req{method: "POST", path: "/v1/users", token: guest, body: `{"email": "a@example.com", "password": "short"}`}, 400, "validation", "password"},
		{"no session", req{method: "GET", path: "/v1/cart"}, 401, "unauthenticated", ""},
		{"guest orders", req{method: "GET", path: "/v1/orders", token: guest}, 403, "login-required", ""},
		{"product not found", req{method: "GET", path: "/v1/products/nope"}, 404, "not-found", ""},
		{"impossible product id", req{method: "GET", path: "/v1/products/a%20b"}, 400, "validation", "id"},
		{"order not found", req{method: "POST", path: "/v1/orders/nope/status", admin: testAdminToken, body: `{"status": "paid"}`}, 404, "not-found", ""},
		{"unknown path", req{method: "GET", path: "/v2/nothing"}, 404, "not-found", ""},
		{"method not allowed", req{method: "DELETE", path: "/v1/products"}, 405, "method-not-allowed", ""},
		{"method not allowed with id", req{method: "PUT", path: "/v1/orders/x"}, 405, "method-not-allowed", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(t, c.q)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			p := r.problem(t)
			if p.Type != problemBase+c.typ || p.RequestID == "" || p.RequestID != r.header.Get("X-Request-Id") {
				t.Fatalf("problem %+v, want type %s", p, c.typ)
			}
			if c.field != "" && (len(p.Errors) == 0 || p.Errors[0].Field != c.field) {
				t.Fatalf("problem %+v does not name field %s", p, c.field)
			}
			if c.status == 405 && r.header.Get("Allow") == "" {
				t.Fatal("405 without Allow")
			}
		})
	}
	// Registration with a taken email is 409 naming email; nothing is written by a failed one.
	e.must(t, 201, req{method: "POST", path: "/v1/users", token: guest, body: `{"email": "dup@example.com", "password": "password123"}`})
	p := e.do(t, req{method: "POST", path: "/v1/users", token: guest, body: `{"email": "DUP@example.com", "password": "password456"}`}).problem(t)
	if p.Status != 409 || p.Errors[0].Field != "email" {
		t.Fatalf("taken email: %+v", p)
	}
	e.must(t, 200, req{method: "POST", path: "/v1/login", token: guest, body: `{"email": "dup@example.com", "password": "password123"}`})
}

// TestInternalErrorsAreNotEchoed: a failing store is a 500 "internal error" with a request
// id; the cause goes to the log only.
func TestInternalErrorsAreNotEchoed(t *testing.T) {
	e := newEnv(t)
	token := e.guest(t)
	_ = e.stores.Close() // every store call now fails with "sql: database is closed"
	r := e.do(t, req{method: "GET", path: "/v1/cart", token: token})
	p := r.problem(t)
	if p.Status != 500 || p.Detail != "internal error" || strings.Contains(string(r.body), "sql") {
		t.Fatalf("internal error leaked: %s", r.body)
	}
	if r.status != http.StatusInternalServerError {
		t.Fatal(r.status)
	}
}
