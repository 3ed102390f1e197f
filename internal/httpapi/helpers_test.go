package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/projection"
	"github.com/shardmart/shardmart/internal/session"
)

const testAdminToken = "test-admin-token-0123456789"

func init() { account.HashCost = bcrypt.MinCost }

// env is a running API over a real embedded store, wired exactly as the serve command does.
type env struct {
	srv       *httptest.Server
	stores    *placement.Stores
	services  Services
	projector *outbox.Projector
	reg       *prometheus.Registry
	client    *http.Client
}

// newEnv serves the API over a real embedded store in a temp SQLite file. Logs are discarded
// so benchmarks measure the API, not the terminal.
func newEnv(tb testing.TB) *env {
	tb.Helper()
	return newEnvWith(tb, nil)
}

// newEnvWith is newEnv with the dependencies adjusted by edit before the API is built.
func newEnvWith(tb testing.TB, edit func(*Deps)) *env {
	tb.Helper()
	return newEnvOpts(tb, placement.Options{}, edit)
}

// newEnvOpts is newEnvWith with the stores opened with o (its SQLitePath is set here).
func newEnvOpts(tb testing.TB, o placement.Options, edit func(*Deps)) *env {
	tb.Helper()
	return newEnvStores(tb, o, nil, edit)
}

// newEnvStores is newEnvOpts with the opened stores replaced by what stores makes of them
// before the services are wired (nil: as opened).
func newEnvStores(tb testing.TB, o placement.Options, stores func(*placement.Stores) *placement.Stores, edit func(*Deps)) *env {
	tb.Helper()
	ctx := context.Background()
	o.SQLitePath = filepath.Join(tb.TempDir(), "shardmart.db")
	s, err := placement.Open(ctx, placement.Embedded(), o)
	if err != nil {
		tb.Fatalf("open stores: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	if stores != nil {
		s = stores(s)
	}
	logger := slog.New(slog.DiscardHandler)
	d, projector := wire(s, testAdminToken, logger)
	d.Ready = func(context.Context) error { return nil }
	if edit != nil {
		edit(&d)
	}
	reg := d.Registry.(*prometheus.Registry)
	h := New(d)
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}
	tb.Cleanup(tr.CloseIdleConnections)
	return &env{srv: srv, stores: s, services: d.Services, projector: projector, reg: reg, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// wire builds the services exactly as the serve command does.
func wire(s *placement.Stores, adminToken string, logger *slog.Logger) (Deps, *outbox.Projector) {
	projector := outbox.NewProjector(s.Outbox, projection.Consumer, logger)
	projection.Register(projector, projection.Targets{Carts: s.Carts, History: s.History})
	carts := &cart.Service{Carts: s.Carts, Products: s.Products, Orders: s.Orders, Now: time.Now}
	sessions := &session.Service{Sessions: s.Sessions, TTL: session.DefaultTTL, Now: time.Now}
	return Deps{
		Services: Services{
			Accounts: &account.Service{Users: s.Users, Sessions: sessions, Carts: carts, Now: time.Now},
			Sessions: sessions,
			Carts:    carts,
			Orders:   &order.Service{Orders: s.Orders, Carts: carts, FollowUps: projection.Inline{P: projector}, Now: time.Now, Logger: logger},
			History:  s.History, Catalog: s.Catalog, Products: s.Products, Events: s.Events,
		},
		AdminToken: adminToken,
		Logger:     logger,
		Registry:   prometheus.NewRegistry(),
		OutboxLag:  projector.Lag,
	}, projector
}

// resp is a decoded response.
type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(tb testing.TB, v any) {
	tb.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		tb.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r resp) problem(tb testing.TB) Problem {
	tb.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("content type %q, want application/problem+json (status %d, body %s)", ct, r.status, r.body)
	}
	var p Problem
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		tb.Fatalf("problem body %s: %v", r.body, err)
	}
	if p.Status != r.status || p.Type == "" || p.Title == "" || p.Instance == "" {
		tb.Fatalf("problem %+v does not match status %d or lacks members", p, r.status)
	}
	return p
}

// req describes one request; token is the session bearer, admin the admin token.
type req struct {
	method, path string
	body         any // string is sent raw, anything else as JSON
	token        string
	admin        string
	header       map[string]string
}

func (e *env) do(tb testing.TB, q req) resp {
	tb.Helper()
	var body io.Reader
	switch b := q.body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			tb.Fatal(err)
		}
		body = bytes.NewReader(raw)
	}
	r, err := http.NewRequest(q.method, e.srv.URL+q.path, body)
	if err != nil {
		tb.Fatal(err)
	}
	if body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	if q.token != "" {
		r.Header.Set("Authorization", "Bearer "+q.token)
	}
	if q.admin != "" {
		r.Header.Set(AdminTokenHeader, q.admin)
	}
	for k, v := range q.header {
		r.Header.Set(k, v)
	}
	res, err := e.client.Do(r)
	if err != nil {
		tb.Fatalf("%s %s: %v", q.method, q.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// must sends q and fails unless the status is want.
func (e *env) must(tb testing.TB, want int, q req) resp {
	tb.Helper()
	r := e.do(tb, q)
	if r.status != want {
		tb.Fatalf("%s %s: status %d, want %d: %s", q.method, q.path, r.status, want, r.body)
	}
	return r
}

// guest starts a session and returns its token.
func (e *env) guest(tb testing.TB) string {
	tb.Helper()
	var s struct {
		Token string `json:"token"`
	}
	e.must(tb, http.StatusCreated, req{method: "POST", path: "/v1/sessions"}).json(tb, &s)
	return s.Token
}

var seq atomic.Int64

// user registers a fresh account, logs a new session in, and returns (the login's token, user id).
func (e *env) user(tb testing.TB) (string, string) {
	tb.Helper()
	token := e.guest(tb)
	email := fmt.Sprintf("u%d-%d@example.com", time.Now().UnixNano(), seq.Add(1))
	var u userResponse
	e.must(tb, http.StatusCreated, req{method: "POST", path: "/v1/users", token: token,
		body: map[string]string{"email": email, "password": "password123"}}).json(tb, &u)
	return e.login(tb, token, email, "password123"), u.ID
}

// login logs the session with token in and returns the new token login hands out.
func (e *env) login(tb testing.TB, token, email, password string) string {
	tb.Helper()
	var l loginResponse
	e.must(tb, http.StatusOK, req{method: "POST", path: "/v1/login", token: token,
		body: map[string]string{"email": email, "password": password}}).json(tb, &l)
	if l.Token == "" || l.Token == token {
		tb.Fatalf("login kept the token it was given")
	}
	return l.Token
}

// product creates a product through the admin API with stock in zone "eu".
func (e *env) product(tb testing.TB, id, category, price string, stock int64) {
	tb.Helper()
	e.must(tb, http.StatusCreated, req{method: "POST", path: "/v1/products", admin: testAdminToken,
		body: map[string]any{"id": id, "name": "Product " + id, "category": category, "price": price,
			"stock": map[string]int64{"eu": stock}}})
}

// seedProduct writes straight to the store (benchmark setup).
func (e *env) seedProduct(tb testing.TB, id, category string, price money.Amount, stock int64) {
	tb.Helper()
	now := time.Now().UTC()
	err := e.stores.Products.CreateProduct(context.Background(), catalog.Product{ID: id, Name: "Product " + id,
		Category: category, Price: price, Stock: map[string]int64{"eu": stock}, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		tb.Fatal(err)
	}
}

func (e *env) put(tb testing.TB, token, productID string, qty int64) resp {
	tb.Helper()
	return e.must(tb, http.StatusOK, req{method: "PUT", path: "/v1/cart/items/" + productID, token: token,
		body: map[string]int64{"quantity": qty}})
}

func (e *env) placeOrder(tb testing.TB, token, key string) resp {
	tb.Helper()
	return e.do(tb, req{method: "POST", path: "/v1/orders", token: token, body: map[string]string{"zone": "eu"},
		header: map[string]string{IdempotencyKeyHeader: key}})
}
