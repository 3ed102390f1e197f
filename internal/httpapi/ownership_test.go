package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestEveryPrivateRouteNeedsASession walks the route table: no token, or a token the server
// never issued, is a 401 problem on every route that acts for a caller.
func TestEveryPrivateRouteNeedsASession(t *testing.T) {
	e := newEnv(t)
	for _, rt := range routes {
		if rt.access != accSession && rt.access != accUser {
			continue
		}
		path := strings.NewReplacer("{id}", "x", "{product_id}", "x").Replace(rt.path)
		for _, token := range []string{"", "forged-token"} {
			r := e.do(t, req{method: rt.method, path: path, token: token, body: map[string]any{}})
			if p := r.problem(t); p.Status != http.StatusUnauthorized {
				t.Errorf("%s token %q: %d, want 401", rt.pattern(), token, p.Status)
			}
		}
	}
}

// ownership sets up two users, A with a cart, an order and an event, and B, a stranger.
type ownership struct {
	e              *env
	a, b           string // tokens
	aOrder, bGuest string
}

func newOwnership(t *testing.T) *ownership {
	e := newEnv(t)
	e.product(t, "p1", "toys", "2.00", 100)
	e.product(t, "p2", "toys", "3.00", 100)
	o := &ownership{e: e}
	o.a, _ = e.user(t)
	o.b, _ = e.user(t)
	o.bGuest = e.guest(t)
	e.put(t, o.a, "p1", 1)
	var ord orderView
	e.must(t, 201, req{method: "POST", path: "/v1/orders", token: o.a, body: map[string]string{"zone": "eu"},
		header: map[string]string{IdempotencyKeyHeader: "shared-key"}}).json(t, &ord)
	o.aOrder = ord.ID
	e.put(t, o.a, "p2", 4)
	e.must(t, 201, req{method: "POST", path: "/v1/events", token: o.a, body: map[string]any{"type": "click", "product_id": "p2"}})
	return o
}

// aCart is A's cart as A sees it.
func (o *ownership) aCart(t *testing.T) cartView {
	var cv cartView
	o.e.must(t, 200, req{method: "GET", path: "/v1/cart", token: o.a}).json(t, &cv)
	return cv
}

func (o *ownership) assertACartIntact(t *testing.T) {
	t.Helper()
	cv := o.aCart(t)
	if len(cv.Items) != 1 || cv.Items[0].ProductID != "p2" || cv.Items[0].Quantity != 4 {
		t.Fatalf("A's cart changed: %+v", cv)
	}
}

func TestOwnershipCart(t *testing.T) {
	o := newOwnership(t)
	for _, tok := range []string{o.b, o.bGuest} {
		var cv cartView
		o.e.must(t, 200, req{method: "GET", path: "/v1/cart", token: tok}).json(t, &cv)
		if len(cv.Items) != 0 {
			t.Fatalf("a stranger reads A's cart: %+v", cv)
		}
		// PUT and DELETE act on the caller's own cart only.
		o.e.put(t, tok, "p2", 1)
		o.e.must(t, 200, req{method: "DELETE", path: "/v1/cart/items/p2", token: tok})
		o.assertACartIntact(t)
	}
}

func TestOwnershipOrders(t *testing.T) {
	o := newOwnership(t)
	e := o.e
	// GET /v1/orders/{id}: another user's order looks exactly like a missing one.
	other := e.do(t, req{method: "GET", path: "/v1/orders/" + o.aOrder, token: o.b}).problem(t)
	missing := e.do(t, req{method: "GET", path: "/v1/orders/0190aaaa-0000-7000-8000-000000000000", token: o.b}).problem(t)
	if other.Status != 404 || other.Type != missing.Type || other.Detail != missing.Detail {
		t.Fatalf("another user's order: %+v vs missing %+v", other, missing)
	}
	if p := e.do(t, req{method: "GET", path: "/v1/orders/" + o.aOrder, token: o.bGuest}).problem(t); p.Status != 403 {
		t.Fatalf("guest reads an order: %+v", p)
	}
	// GET /v1/orders: B's history is B's.
	var hist listView[orderView]
	e.must(t, 200, req{method: "GET", path: "/v1/orders", token: o.b}).json(t, &hist)
	if len(hist.Items) != 0 {
		t.Fatalf("B sees A's history: %+v", hist)
	}
	// POST /v1/orders with A's idempotency key orders B's cart, never returns A's order,
	// and leaves A's cart alone.
	if p := e.placeOrder(t, o.b, "shared-key").problem(t); p.Status != 409 || p.Type != problemBase+"empty-cart" {
		t.Fatalf("B with an empty cart and A's key: %+v", p)
	}
	e.put(t, o.b, "p1", 2)
	r := e.placeOrder(t, o.b, "shared-key")
	var ord orderView
	r.json(t, &ord)
	if r.status != 201 || ord.ID == o.aOrder || ord.Total.String() != "4.00" {
		t.Fatalf("B's order with A's key: %d %+v", r.status, ord)
	}
	o.assertACartIntact(t)
	// POST /v1/orders/{id}/status is admin-only: A's own session cannot pay A's order.
	if p := e.do(t, req{method: "POST", path: "/v1/orders/" + o.aOrder + "/status", token: o.a,
		body: map[string]string{"status": "paid"}}).problem(t); p.Status != 401 {
		t.Fatalf("user changes an order status: %+v", p)
	}
}

func TestOwnershipEvents(t *testing.T) {
	o := newOwnership(t)
	for _, tok := range []string{o.b, o.bGuest} {
		var evs listView[eventView]
		o.e.must(t, 200, req{method: "GET", path: "/v1/events", token: tok}).json(t, &evs)
		if len(evs.Items) != 0 {
			t.Fatalf("a stranger reads A's events: %+v", evs)
		}
	}
	// An event body cannot name an actor: the field is unknown.
	p := o.e.do(t, req{method: "POST", path: "/v1/events", token: o.b,
		body: map[string]any{"type": "click", "actor": "u:someone"}}).problem(t)
	if p.Status != 400 || p.Errors[0].Field != "actor" {
		t.Fatalf("actor in body: %+v", p)
	}
	var evs listView[eventView]
	o.e.must(t, 200, req{method: "GET", path: "/v1/events?type=click", token: o.a}).json(t, &evs)
	if len(evs.Items) != 1 || evs.Items[0].ProductID != "p2" {
		t.Fatalf("A's own events: %+v", evs)
	}
}

func TestOwnershipSessions(t *testing.T) {
	o := newOwnership(t)
	e := o.e
	// POST /v1/sessions returns the token and expiry only: never the stored session id.
	r := e.must(t, 201, req{method: "POST", path: "/v1/sessions"})
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil || len(m) != 2 || m["token"] == nil || m["expires_at"] == nil {
		t.Fatalf("session response %s", r.body)
	}
	// A session bound to A cannot be taken over by logging in as B: 409, and it stays A's.
	bEmail := "b-owner@example.com"
	e.must(t, 201, req{method: "POST", path: "/v1/users", token: o.bGuest, body: map[string]string{"email": bEmail, "password": "password123"}})
	p := e.do(t, req{method: "POST", path: "/v1/login", token: o.a, body: map[string]string{"email": bEmail, "password": "password123"}}).problem(t)
	if p.Status != 409 {
		t.Fatalf("login as B on A's session: %+v", p)
	}
	o.assertACartIntact(t)
	// A guest cart merges only into the user who logs in on that very session.
	e.put(t, o.bGuest, "p1", 7)
	bToken := e.login(t, o.bGuest, bEmail, "password123")
	o.assertACartIntact(t)
	var cv cartView
	e.must(t, 200, req{method: "GET", path: "/v1/cart", token: bToken}).json(t, &cv)
	if len(cv.Items) != 1 || cv.Items[0].Quantity != 7 {
		t.Fatalf("B's merged cart: %+v", cv)
	}
	// Wrong credentials: one answer for unknown email and wrong password.
	wrongPw := e.do(t, req{method: "POST", path: "/v1/login", token: e.guest(t), body: map[string]string{"email": bEmail, "password": "password999"}}).problem(t)
	unknown := e.do(t, req{method: "POST", path: "/v1/login", token: e.guest(t), body: map[string]string{"email": "nobody@example.com", "password": "password123"}}).problem(t)
	if wrongPw.Status != 401 || wrongPw.Detail != unknown.Detail || wrongPw.Type != unknown.Type {
		t.Fatalf("credential answers differ: %+v / %+v", wrongPw, unknown)
	}
}
