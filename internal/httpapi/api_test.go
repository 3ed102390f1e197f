package httpapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestShoppingFlow walks a guest from browsing to a delivered order, as the README shows it.
func TestShoppingFlow(t *testing.T) {
	e := newEnv(t)
	e.product(t, "mug", "kitchen", "12.50", 10)
	e.product(t, "pan", "kitchen", "30", 10)
	e.product(t, "kettle", "kitchen", "45.99", 10)

	// Guest browses: category with a price range, cheapest first.
	var list listView[productView]
	e.must(t, 200, req{method: "GET", path: "/v1/products?category=kitchen&min_price=10&max_price=40"}).json(t, &list)
	if len(list.Items) != 2 || list.Items[0].ID != "mug" || list.Items[1].ID != "pan" || list.Items[0].Price.String() != "12.50" {
		t.Fatalf("search = %+v", list)
	}
	var prod map[string]any
	e.must(t, 200, req{method: "GET", path: "/v1/products/mug"}).json(t, &prod)
	if prod["price"] != "12.50" {
		t.Fatalf("price must be a decimal string, got %#v", prod["price"])
	}

	guest := e.guest(t)
	e.put(t, guest, "mug", 2)
	e.put(t, guest, "pan", 1)
	var cv cartView
	e.must(t, 200, req{method: "GET", path: "/v1/cart", token: guest}).json(t, &cv)
	if len(cv.Items) != 2 || cv.Subtotal.String() != "55.00" || cv.ExpiresAt == nil {
		t.Fatalf("guest cart = %+v", cv)
	}
	e.must(t, 201, req{method: "POST", path: "/v1/events", token: guest, body: map[string]any{"type": "view", "product_id": "mug"}})

	// Guests cannot order.
	if p := e.placeOrder(t, guest, "k0").problem(t); p.Status != 403 {
		t.Fatalf("guest order: %+v", p)
	}

	// Register, then log this session in: the guest cart merges into the user's.
	e.must(t, 201, req{method: "POST", path: "/v1/users", token: guest, body: map[string]string{"email": "Ann@Example.com", "password": "password123"}})
	var login loginResponse
	e.must(t, 200, req{method: "POST", path: "/v1/login", token: guest, body: map[string]string{"email": "ann@example.com", "password": "password123"}}).json(t, &login)
	if login.User.Email != "ann@example.com" || len(login.Cart.Items) != 2 || login.Cart.Subtotal.String() != "55.00" {
		t.Fatalf("login = %+v", login)
	}
	// Login hands out a new token; the guest's stops working (no session fixation).
	if login.Token == "" || login.Token == guest {
		t.Fatalf("login kept the guest token")
	}
	if p := e.do(t, req{method: "GET", path: "/v1/cart", token: guest}).problem(t); p.Status != 401 {
		t.Fatalf("guest token after login: %d, want 401", p.Status)
	}
	tok := login.Token
	// Logging in again from the user's session changes nothing but the token.
	e.must(t, 200, req{method: "POST", path: "/v1/login", token: tok, body: map[string]string{"email": "ann@example.com", "password": "password123"}}).json(t, &login)
	if len(login.Cart.Items) != 2 || login.Cart.Items[0].Quantity+login.Cart.Items[1].Quantity != 3 {
		t.Fatalf("second login changed the cart: %+v", login.Cart)
	}
	tok = login.Token
	e.put(t, tok, "kettle", 1)

	// Order: 201 with Location; the same key again is the same order, 200, marked replayed.
	r := e.placeOrder(t, tok, "order-1")
	if r.status != 201 {
		t.Fatalf("place: %d %s", r.status, r.body)
	}
	var o orderView
	r.json(t, &o)
	if r.header.Get("Location") != "/v1/orders/"+o.ID || o.Total.String() != "100.99" || o.Status != "created" || len(o.Items) != 3 {
		t.Fatalf("order = %+v, location %q", o, r.header.Get("Location"))
	}
	r = e.placeOrder(t, tok, "order-1")
	var again orderView
	r.json(t, &again)
	if r.status != 200 || again.ID != o.ID || r.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("replay: %d %+v", r.status, again)
	}
	// The same key with another request is refused, naming the header.
	r = e.do(t, req{method: "POST", path: "/v1/orders", token: tok, body: map[string]string{"zone": "us"},
		header: map[string]string{IdempotencyKeyHeader: "order-1"}})
	if p := r.problem(t); p.Status != 422 || p.Type != problemBase+"idempotency-key-reused" || len(p.Errors) != 1 || p.Errors[0].Field != "Idempotency-Key" {
		t.Fatalf("reused key, other zone: %+v", p)
	}
	// The cart was consumed: it is empty now, and a new key finds nothing to order.
	e.must(t, 200, req{method: "GET", path: "/v1/cart", token: tok}).json(t, &cv)
	if len(cv.Items) != 0 {
		t.Fatalf("cart after order = %+v", cv)
	}
	if p := e.placeOrder(t, tok, "order-2").problem(t); p.Status != 409 || p.Type != problemBase+"empty-cart" {
		t.Fatalf("empty cart order: %+v", p)
	}
	e.must(t, 200, req{method: "GET", path: "/v1/products/mug"}).json(t, &prod)
	if prod["stock"].(map[string]any)["eu"].(float64) != 8 {
		t.Fatalf("stock after order: %v", prod["stock"])
	}

	// History and the order page.
	var hist listView[orderView]
	e.must(t, 200, req{method: "GET", path: "/v1/orders", token: tok}).json(t, &hist)
	if len(hist.Items) != 1 || hist.Items[0].ID != o.ID || hist.Items[0].Total.String() != "100.99" {
		t.Fatalf("history = %+v", hist)
	}
	e.must(t, 200, req{method: "GET", path: "/v1/orders/" + o.ID, token: tok})

	// Status: created -> paid -> shipped; shipped -> paid is illegal (409).
	for _, st := range []string{"paid", "shipped"} {
		e.must(t, 200, req{method: "POST", path: "/v1/orders/" + o.ID + "/status", admin: testAdminToken, body: map[string]string{"status": st}})
	}
	r = e.do(t, req{method: "POST", path: "/v1/orders/" + o.ID + "/status", admin: testAdminToken, body: map[string]string{"status": "paid"}})
	if p := r.problem(t); p.Status != 409 || p.Errors[0].Field != "status" {
		t.Fatalf("illegal transition: %+v", p)
	}
	e.must(t, 200, req{method: "GET", path: "/v1/orders", token: tok}).json(t, &hist)
	if hist.Items[0].Status != "shipped" {
		t.Fatalf("history status = %s", hist.Items[0].Status)
	}
	// Events: the tok-time view is under the tok session's actor, not the user's.
	var evs listView[eventView]
	e.must(t, 200, req{method: "GET", path: "/v1/events", token: tok}).json(t, &evs)
	if len(evs.Items) != 0 {
		t.Fatalf("user sees tok-time events: %+v", evs)
	}
}

// TestOversellRace is ORD-1 through HTTP: 20 buyers, 5 units, exactly 5 orders.
func TestOversellRace(t *testing.T) {
	e := newEnv(t)
	e.product(t, "last", "toys", "9.99", 5)
	const buyers = 20
	tokens := make([]string, buyers)
	for i := range tokens {
		tokens[i], _ = e.user(t)
		e.put(t, tokens[i], "last", 1)
	}
	var wg sync.WaitGroup
	results := make([]resp, buyers)
	for i := range tokens {
		wg.Go(func() { results[i] = e.placeOrder(t, tokens[i], fmt.Sprintf("race-%d", i)) })
	}
	wg.Wait()
	created := 0
	for _, r := range results {
		switch r.status {
		case 201:
			created++
		case 409:
			p := r.problem(t)
			if p.ProductID != "last" || p.Available == nil || *p.Available != 0 || p.Errors[0].Field != "items" {
				t.Fatalf("409 must name the short item: %+v", p)
			}
		default:
			t.Fatalf("unexpected %d %s", r.status, r.body)
		}
	}
	if created != 5 {
		t.Fatalf("%d orders for 5 units", created)
	}
	var prod productView
	e.must(t, 200, req{method: "GET", path: "/v1/products/last"}).json(t, &prod)
	if prod.Stock["eu"] != 0 {
		t.Fatalf("stock = %d", prod.Stock["eu"])
	}
}

// TestIdempotentConcurrentReplay: the same key sent concurrently yields one order.
func TestIdempotentConcurrentReplay(t *testing.T) {
	e := newEnv(t)
	e.product(t, "p1", "toys", "1.00", 100)
	token, _ := e.user(t)
	e.put(t, token, "p1", 3)
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Go(func() {
			r := e.placeOrder(t, token, "same-key")
			var o orderView
			if r.status != 200 && r.status != 201 {
				t.Errorf("status %d %s", r.status, r.body)
				return
			}
			r.json(t, &o)
			ids[i] = o.ID
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("two orders for one key: %v", ids)
		}
	}
	var prod productView
	e.must(t, 200, req{method: "GET", path: "/v1/products/p1"}).json(t, &prod)
	if prod.Stock["eu"] != 97 {
		t.Fatalf("stock %d: the key must decrement once", prod.Stock["eu"])
	}
	var hist listView[orderView]
	e.must(t, 200, req{method: "GET", path: "/v1/orders", token: token}).json(t, &hist)
	if len(hist.Items) != 1 {
		t.Fatalf("history has %d orders", len(hist.Items))
	}
}

func TestProductAdmin(t *testing.T) {
	e := newEnv(t)
	// id is optional: the server generates one.
	var p productView
	r := e.must(t, 201, req{method: "POST", path: "/v1/products", admin: testAdminToken,
		body: map[string]any{"name": "Lamp", "category": "home", "price": "19.9"}})
	r.json(t, &p)
	if p.ID == "" || p.Price.String() != "19.90" || r.header.Get("Location") != "/v1/products/"+p.ID {
		t.Fatalf("created %+v", p)
	}
	if pr := e.do(t, req{method: "POST", path: "/v1/products", admin: testAdminToken,
		body: map[string]any{"id": p.ID, "name": "Lamp", "category": "home", "price": "1"}}).problem(t); pr.Status != 409 || pr.Errors[0].Field != "id" {
		t.Fatalf("duplicate: %+v", pr)
	}
	e.must(t, 200, req{method: "PATCH", path: "/v1/products/" + p.ID, admin: testAdminToken,
		body: map[string]any{"price": "21.00", "attributes": map[string]string{"color": "red"}}}).json(t, &p)
	if p.Price.String() != "21.00" || p.Name != "Lamp" || p.Attributes["color"] != "red" {
		t.Fatalf("patched %+v", p)
	}
	// An invalid patch writes nothing.
	pr := e.do(t, req{method: "PATCH", path: "/v1/products/" + p.ID, admin: testAdminToken,
		body: map[string]any{"name": "", "price": "22.00"}}).problem(t)
	if pr.Status != 400 || pr.Errors[0].Field != "name" {
		t.Fatalf("invalid patch: %+v", pr)
	}
	e.must(t, 200, req{method: "GET", path: "/v1/products/" + p.ID}).json(t, &p)
	if p.Price.String() != "21.00" || p.Name != "Lamp" {
		t.Fatalf("invalid patch was half-applied: %+v", p)
	}
	var sv stockView
	e.must(t, 200, req{method: "POST", path: "/v1/products/" + p.ID + "/stock", admin: testAdminToken,
		body: map[string]any{"zone": "eu", "delta": 5}}).json(t, &sv)
	if sv.Stock != 5 {
		t.Fatalf("stock %+v", sv)
	}
	pr = e.do(t, req{method: "POST", path: "/v1/products/" + p.ID + "/stock", admin: testAdminToken,
		body: map[string]any{"zone": "eu", "delta": -6}}).problem(t)
	if pr.Status != 409 || pr.ProductID != p.ID || pr.Errors[0].Field != "delta" {
		t.Fatalf("below zero: %+v", pr)
	}
	e.must(t, 404, req{method: "PATCH", path: "/v1/products/nope", admin: testAdminToken, body: map[string]any{"name": "x"}})
	e.must(t, 404, req{method: "POST", path: "/v1/products/nope/stock", admin: testAdminToken, body: map[string]any{"zone": "eu", "delta": 1}})
}

// TestAdminAuth: every admin route without the token is 401, with a wrong one 403, and
// disabled (403) when the server has no token.
func TestAdminAuth(t *testing.T) {
	e := newEnv(t)
	e.product(t, "p1", "toys", "1.00", 1)
	for _, rt := range routes {
		if rt.access != accAdmin {
			continue
		}
		path := strings.NewReplacer("{id}", "p1").Replace(rt.path)
		for _, c := range []struct {
			admin string
			want  int
		}{{"", 401}, {"wrong", 403}, {testAdminToken[:len(testAdminToken)-1], 403}} {
			r := e.do(t, req{method: rt.method, path: path, admin: c.admin, body: map[string]any{}})
			if p := r.problem(t); p.Status != c.want {
				t.Errorf("%s with admin token %q: %d, want %d", rt.pattern(), c.admin, p.Status, c.want)
			}
		}
		// A user session is not an admin.
		token, _ := e.user(t)
		if p := e.do(t, req{method: rt.method, path: path, token: token, body: map[string]any{}}).problem(t); p.Status != 401 {
			t.Errorf("%s with a user session: %d", rt.pattern(), p.Status)
		}
	}
	// No admin token configured: admin routes are disabled for everyone.
	srv := New(Deps{Services: e.services, Logger: slog.New(slog.DiscardHandler)})
	rec := httptest.NewRecorder()
	r, _ := http.NewRequest("POST", "/v1/products", strings.NewReader(`{}`))
	r.Header.Set(AdminTokenHeader, "anything")
	srv.ServeHTTP(rec, r)
	if rec.Code != 403 {
		t.Fatalf("disabled admin: %d", rec.Code)
	}
}

func TestSessionExpiryAndGarbageTokens(t *testing.T) {
	e := newEnv(t)
	for _, h := range []string{"", "Bearer", "Bearer ", "Basic abc", "Bearer " + strings.Repeat("x", 500), "Bearer not-a-token"} {
		r, _ := http.NewRequest("GET", e.srv.URL+"/v1/cart", nil)
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		res, err := e.client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 401 || res.Header.Get("WWW-Authenticate") == "" {
			t.Fatalf("Authorization %q: %d", h, res.StatusCode)
		}
	}
}
