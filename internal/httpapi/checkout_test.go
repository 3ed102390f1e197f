package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
)

// CRT-5: a login into a full cart tells the user which guest lines did not fit.
func TestLoginListsWhatDidNotMerge(t *testing.T) {
	e := newEnv(t)
	email := fmt.Sprintf("full-%d@example.com", time.Now().UnixNano())
	creds := map[string]string{"email": email, "password": "password123"}
	userToken := e.guest(t)
	e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/users", token: userToken, body: creds})
	var first loginResponse
	e.must(t, http.StatusOK, req{method: "POST", path: "/v1/login", token: userToken, body: creds}).json(t, &first)
	if first.NotMerged == nil || len(first.NotMerged) != 0 {
		t.Errorf("login with nothing to merge: not_merged = %v, want []", first.NotMerged)
	}
	userToken = first.Token
	cat := fmt.Sprintf("full%d", time.Now().UnixNano())
	for i := 0; i < cart.MaxItems; i++ {
		id := fmt.Sprintf("%s-%03d", cat, i)
		e.seedProduct(t, id, cat, 100, 10)
		e.put(t, userToken, id, 1)
	}
	e.seedProduct(t, cat+"-new", cat, 100, 10)
	guest := e.guest(t)
	e.put(t, guest, cat+"-new", 2)
	e.put(t, guest, cat+"-000", 3)
	var login loginResponse
	e.must(t, http.StatusOK, req{method: "POST", path: "/v1/login", token: guest, body: creds}).json(t, &login)
	if len(login.Cart.Items) != cart.MaxItems {
		t.Errorf("cart after login: %d lines, want %d", len(login.Cart.Items), cart.MaxItems)
	}
	if len(login.NotMerged) != 1 || login.NotMerged[0] != (mergeLeftover{ProductID: cat + "-new", Quantity: 2}) {
		t.Errorf("not_merged = %+v, want the 2 of %s-new", login.NotMerged, cat)
	}
}

// ORD-1: while a checkout holds the cart, changes and a second checkout are 409s naming why.
func TestCartChangesDuringCheckoutAre409(t *testing.T) {
	e := newEnv(t)
	token, userID := e.user(t)
	e.product(t, "frozen-1", "frozen", "2.00", 10)
	e.product(t, "frozen-2", "frozen", "2.00", 10)
	e.put(t, token, "frozen-1", 1)
	ctx := context.Background()
	now := time.Now().UTC()
	if _, err := e.stores.Carts.BeginCheckout(ctx, cart.User(userID), "o-elsewhere", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	for _, q := range []req{
		{method: "PUT", path: "/v1/cart/items/frozen-2", token: token, body: map[string]int64{"quantity": 1}},
		{method: "DELETE", path: "/v1/cart/items/frozen-1", token: token},
		{method: "POST", path: "/v1/orders", token: token, body: map[string]string{"zone": "eu"}, header: map[string]string{IdempotencyKeyHeader: "k-frozen"}},
	} {
		p := e.do(t, q).problem(t)
		if p.Status != http.StatusConflict || p.Type != problemBase+"checkout-in-progress" {
			t.Errorf("%s %s during checkout: %d %s, want 409 checkout-in-progress", q.method, q.path, p.Status, p.Type)
		}
	}
	if err := e.stores.Carts.EndCheckout(ctx, cart.User(userID), mustCartID(t, e, userID), "o-elsewhere", now); err != nil {
		t.Fatal(err)
	}
	e.put(t, token, "frozen-2", 1)
}

func mustCartID(t *testing.T, e *env, userID string) string {
	t.Helper()
	c, err := e.stores.Carts.ActiveCart(context.Background(), cart.User(userID), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

// SES-1: logout revokes the caller's token at once; a new session works as before.
func TestLogoutRevokesTheToken(t *testing.T) {
	e := newEnv(t)
	token, _ := e.user(t)
	e.must(t, http.StatusOK, req{method: "GET", path: "/v1/cart", token: token})
	e.must(t, http.StatusNoContent, req{method: "POST", path: "/v1/logout", token: token})
	if p := e.do(t, req{method: "GET", path: "/v1/cart", token: token}).problem(t); p.Status != http.StatusUnauthorized {
		t.Errorf("token after logout: %d, want 401", p.Status)
	}
	if p := e.do(t, req{method: "POST", path: "/v1/logout", token: token}).problem(t); p.Status != http.StatusUnauthorized {
		t.Errorf("second logout: %d, want 401", p.Status)
	}
}

// SES-1 EVT-1: logins, registrations, new sessions and events are rate-limited: past the burst a 429 problem
// with Retry-After, and the client is served again once that time has passed.
func TestRateLimits(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	e := newEnvWith(t, func(d *Deps) {
		d.Now = clock
		d.Limits = Limits{LoginPerClient: PerMinute(6), LoginPerAccount: PerMinute(4),
			SessionsPerClient: PerMinute(10), EventsPerSession: PerMinute(4), EventsPerClient: PerMinute(12),
			RegisterPerClient: PerMinute(4)}
	})
	limited := func(what string, q req) {
		t.Helper()
		r := e.do(t, q)
		p := r.problem(t)
		if p.Status != http.StatusTooManyRequests || p.Type != problemBase+"rate-limited" {
			t.Fatalf("%s past the limit: %d %s, want 429 rate-limited", what, p.Status, p.Type)
		}
		if secs, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || secs < 1 || secs > 60 {
			t.Fatalf("%s: Retry-After %q", what, r.header.Get("Retry-After"))
		}
	}

	tokens := make([]string, 5) // a burst of 5 sessions
	for i := range tokens {
		tokens[i] = e.guest(t)
	}
	limited("session creation", req{method: "POST", path: "/v1/sessions"})

	// Registrations cost a bcrypt hash each: a burst of 2 per client.
	for i := range 2 {
		e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/users", token: tokens[0],
			body: map[string]string{"email": fmt.Sprintf("new-%d@example.com", i), "password": "password123"}})
	}
	limited("registrations", req{method: "POST", path: "/v1/users", token: tokens[1],
		body: map[string]string{"email": "new-2@example.com", "password": "password123"}})

	for i := 0; i < 2; i++ { // a burst of 2 events per session
		e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/events", token: tokens[0], body: map[string]string{"type": "view"}})
	}
	limited("events", req{method: "POST", path: "/v1/events", token: tokens[0], body: map[string]string{"type": "view"}})
	e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/events", token: tokens[1], body: map[string]string{"type": "view"}})
	// A client's sessions share its event budget (a burst of 6): fresh sessions do not renew it.
	for _, tok := range []string{tokens[2], tokens[2], tokens[3]} {
		e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/events", token: tok, body: map[string]string{"type": "view"}})
	}
	limited("events from a client's next session", req{method: "POST", path: "/v1/events", token: tokens[4], body: map[string]string{"type": "view"}})

	// Password guessing on one account: 2 tries, then 429 — also from another session.
	wrong := map[string]string{"email": "victim@example.com", "password": "guess-guess"}
	for i := 0; i < 2; i++ {
		if p := e.do(t, req{method: "POST", path: "/v1/login", token: tokens[2], body: wrong}).problem(t); p.Status != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i+1, p.Status)
		}
	}
	limited("logins on one account", req{method: "POST", path: "/v1/login", token: tokens[3], body: wrong})

	advance(time.Minute)
	e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/sessions"})
	e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/events", token: tokens[0], body: map[string]string{"type": "view"}})
	if p := e.do(t, req{method: "POST", path: "/v1/login", token: tokens[2], body: wrong}).problem(t); p.Status != http.StatusUnauthorized {
		t.Errorf("login a minute later: %d, want 401 (served again)", p.Status)
	}
}

// A login whose merge is refused (a checkout holds the user's cart) changes nothing: 409, the
// guest token still works and its cart is intact, and the login succeeds once the cart is free.
func TestLoginDuringCheckoutIsRefusedAndCanBeRepeated(t *testing.T) {
	e := newEnv(t)
	email := fmt.Sprintf("busy-%d@example.com", time.Now().UnixNano())
	creds := map[string]string{"email": email, "password": "password123"}
	first := e.guest(t)
	var u userResponse
	e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/users", token: first, body: creds}).json(t, &u)
	userToken := e.login(t, first, email, "password123")
	e.product(t, "busy-1", "busy", "1.00", 5)
	e.put(t, userToken, "busy-1", 1)
	ctx := context.Background()
	now := time.Now().UTC()
	if _, err := e.stores.Carts.BeginCheckout(ctx, cart.User(u.ID), "o-busy", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	guest := e.guest(t)
	e.put(t, guest, "busy-1", 2)
	if p := e.do(t, req{method: "POST", path: "/v1/login", token: guest, body: creds}).problem(t); p.Status != http.StatusConflict || p.Type != problemBase+"checkout-in-progress" {
		t.Fatalf("login during checkout: %d %s, want 409 checkout-in-progress", p.Status, p.Type)
	}
	var gc cartView
	e.must(t, http.StatusOK, req{method: "GET", path: "/v1/cart", token: guest}).json(t, &gc)
	if len(gc.Items) != 1 || gc.Items[0].Quantity != 2 {
		t.Fatalf("guest cart after a refused login: %+v", gc.Items)
	}
	if err := e.stores.Carts.EndCheckout(ctx, cart.User(u.ID), mustCartID(t, e, u.ID), "o-busy", now); err != nil {
		t.Fatal(err)
	}
	e.login(t, guest, email, "password123")
}
