// Package roundtrips counts the statements each kind of HTTP request runs on its critical path,
// per placement, and holds them to a budget (Budgets). The counts come from the request's own
// trace: the statement spans that the drivers' hooks record, a Cassandra statement through
// gocql's QueryObserver and BatchObserver, a MongoDB wire command through the driver's
// CommandMonitor, an SQL statement through the embedded store's traced connection. Each is
// tied to its request by the request's context. Driver re-attempts (speculative executions,
// retries) are not counted: they depend on timing, the statements do not.
package roundtrips

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/tracing"
)

// Placements measured.
const (
	Embedded  = "embedded"  // every family in SQLite
	Cassandra = "cassandra" // orders, products and users in SQLite; the other families on Cassandra
	MongoDB   = "mongodb"   // every family on MongoDB
)

// Request kinds: the shop workload's (internal/loadgen) and the requests around them.
const (
	Browse    = "browse"     // GET /v1/products?category=
	Search    = "search"     // GET /v1/products?category=&min_price=&max_price=
	Product   = "product"    // GET /v1/products/{id}
	Session   = "session"    // POST /v1/sessions
	Register  = "register"   // POST /v1/users
	CartEdit  = "cart edit"  // PUT /v1/cart/items/{id}
	CartView  = "cart view"  // GET /v1/cart
	Event     = "event"      // POST /v1/events
	Login     = "login"      // POST /v1/login, merging the guest cart
	Checkout  = "checkout"   // POST /v1/orders
	OrderView = "order view" // GET /v1/orders/{id}
	History   = "history"    // GET /v1/orders
)

// Budget is the most statements one request of a kind may run on a placement.
type Budget struct {
	Placement, Request string
	Statements         int
}

// Count is what the requests of one kind ran.
type Count struct {
	Request  string
	Requests int
	// Max is the most statements one request ran; Backends and Names are that request's.
	Max      int
	Backends map[string]int
	Names    []string
}

// Table is one placement's counts, in the script's order.
type Table struct {
	Placement string
	Counts    []Count
}

// Reps is how many times the script runs each step: the first round meets cold caches.
const Reps = 3

// Measure opens a shop with cfg, traces every request, runs the script through its HTTP API and
// counts each request's statements.
func Measure(ctx context.Context, placementName string, cfg shop.Config) (Table, error) {
	tr, err := tracing.Start(ctx, tracing.Config{SampleRatio: 1, RatioGiven: true, Service: "roundtrips"})
	if err != nil {
		return Table{}, err
	}
	defer tr.Shutdown(context.WithoutCancel(ctx))
	cfg.Backends.Tracer = tr.Tracer()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := shop.Open(ctx, cfg)
	if err != nil {
		return Table{}, fmt.Errorf("open the %s shop: %w", placementName, err)
	}
	defer s.Close()
	h := httpapi.New(httpapi.Deps{Services: s.API(), AdminToken: adminToken, Logger: cfg.Logger, Tracer: tr.Tracer()})
	c := &client{ctx: ctx, h: h, kinds: map[trace.TraceID]string{}}
	if err := script(ctx, c, s); err != nil {
		return Table{}, fmt.Errorf("%s: %w", placementName, err)
	}
	return Table{Placement: placementName, Counts: c.count(tr.Recent.Spans())}, nil
}

const adminToken = "roundtrips-admin-token-0123456789abcdef"

// client serves requests through the API handler in this goroutine, each under a trace id of
// its own, so a request's root span has ended when the call returns.
type client struct {
	ctx   context.Context
	h     http.Handler
	kinds map[trace.TraceID]string
	order []string
}

// do sends one request of kind; into, if not nil, receives the JSON answer.
func (c *client) do(kind, method, path, token, body string, want int, into any, hdr ...string) error {
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	ctx := c.ctx
	if kind != "" {
		// A remote, sampled parent: the API's span becomes the root of a trace with this id.
		ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
		c.kinds[tid] = kind
		if !slices.Contains(c.order, kind) {
			c.order = append(c.order, kind)
		}
	}
	req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set(httpapi.AdminTokenHeader, adminToken)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	c.h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	if rec.Code != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, rec.Code, want, bytes.TrimSpace(b))
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return nil
}

// script is the request sequence measured: two categories of products are created (not
// counted), then Reps times a guest browses, searches, opens a product, registers, fills and
// views a cart, posts an event, logs in (the cart merges), adds to the cart, orders, and reads
// the order and the history.
func script(ctx context.Context, c *client, s *shop.Shop) error {
	var b [4]byte
	_, _ = rand.Read(b[:])
	run := hex.EncodeToString(b[:])
	// Search has a category of its own: a browse of the same category would fill the card
	// cache it reads.
	cat, searched := "rt"+run, "rts"+run
	p1, p2 := cat+"-mug", cat+"-pan"
	for _, p := range []struct{ id, category, price string }{{p1, cat, "12.50"}, {p2, cat, "30.00"}, {searched + "-cup", searched, "20.00"}} {
		body := fmt.Sprintf(`{"id":%q,"name":"Mug","category":%q,"price":%q,"stock":{"eu-west":1000}}`, p.id, p.category, p.price)
		if err := c.do("", "POST", "/v1/products", "", body, http.StatusCreated, nil); err != nil {
			return err
		}
	}
	if err := s.Projector.Sync(ctx); err != nil {
		return fmt.Errorf("project the products: %w", err)
	}
	for r := range Reps {
		var guest, user struct{ Token string }
		var order struct{ ID string }
		cred := fmt.Sprintf(`{"email":"rt-%s-%d@example.com","password":"correct horse battery"}`, run, r)
		steps := []func() error{
			func() error { return c.do(Session, "POST", "/v1/sessions", "", "", http.StatusCreated, &guest) },
			func() error {
				return c.do(Browse, "GET", "/v1/products?category="+cat+"&limit=20", "", "", http.StatusOK, nil)
			},
			func() error {
				return c.do(Search, "GET", "/v1/products?category="+searched+"&min_price=10.00&max_price=50.00&limit=20", "", "", http.StatusOK, nil)
			},
			func() error { return c.do(Product, "GET", "/v1/products/"+p1, "", "", http.StatusOK, nil) },
			func() error { return c.do(Register, "POST", "/v1/users", guest.Token, cred, http.StatusCreated, nil) },
			func() error {
				return c.do(CartEdit, "PUT", "/v1/cart/items/"+p1, guest.Token, `{"quantity":2}`, http.StatusOK, nil)
			},
			func() error { return c.do(CartView, "GET", "/v1/cart", guest.Token, "", http.StatusOK, nil) },
			func() error {
				return c.do(Event, "POST", "/v1/events", guest.Token, `{"type":"view","product_id":"`+p1+`"}`, http.StatusCreated, nil)
			},
			func() error { return c.do(Login, "POST", "/v1/login", guest.Token, cred, http.StatusOK, &user) },
			func() error {
				return c.do(CartEdit, "PUT", "/v1/cart/items/"+p2, user.Token, `{"quantity":1}`, http.StatusOK, nil)
			},
			func() error {
				return c.do(Checkout, "POST", "/v1/orders", user.Token, `{"zone":"eu-west"}`, http.StatusCreated, &order,
					httpapi.IdempotencyKeyHeader, fmt.Sprintf("rt-%s-%d", run, r))
			},
			func() error {
				return c.do(OrderView, "GET", "/v1/orders/"+order.ID, user.Token, "", http.StatusOK, nil)
			},
			func() error { return c.do(History, "GET", "/v1/orders?limit=10", user.Token, "", http.StatusOK, nil) },
		}
		for _, step := range steps {
			if err := step(); err != nil {
				return err
			}
		}
	}
	return nil
}

// count reads the statements of each request's trace.
func (c *client) count(spans []tracing.Span) []Count {
	type req struct {
		backends map[string]int
		names    []string
		n        int
	}
	reqs := map[trace.TraceID]*req{}
	for _, sp := range spans {
		tid, err := trace.TraceIDFromHex(sp.TraceID)
		if err != nil {
			continue
		}
		if _, ok := c.kinds[tid]; !ok {
			continue
		}
		r := reqs[tid]
		if r == nil {
			r = &req{backends: map[string]int{}}
			reqs[tid] = r
		}
		if sp.Attrs[string(tracing.KeyKind)] != tracing.KindStatement {
			continue
		}
		if a := sp.Attrs[string(tracing.KeyAttempt)]; a != "" && a != "0" {
			continue // a driver re-attempt of a statement already counted
		}
		r.n++
		r.backends[sp.Attrs[string(tracing.KeyBackend)]]++
		r.names = append(r.names, sp.Name)
	}
	byKind := map[string]*Count{}
	for tid, kind := range c.kinds {
		r := reqs[tid]
		if r == nil {
			continue // its trace was not recorded: the count says 0 requests
		}
		ct := byKind[kind]
		if ct == nil {
			ct = &Count{Request: kind}
			byKind[kind] = ct
		}
		ct.Requests++
		if r.n > ct.Max || ct.Backends == nil {
			ct.Max, ct.Backends, ct.Names = r.n, r.backends, r.names
		}
	}
	out := make([]Count, 0, len(c.order))
	for _, k := range c.order {
		if ct := byKind[k]; ct != nil {
			slices.Sort(ct.Names)
			out = append(out, *ct)
		} else {
			out = append(out, Count{Request: k})
		}
	}
	return out
}

// budgetOf is the budget of a placement's request kind, and whether there is one.
func budgetOf(placementName, request string) (int, bool) {
	i := slices.IndexFunc(Budgets, func(b Budget) bool { return b.Placement == placementName && b.Request == request })
	if i < 0 {
		return 0, false
	}
	return Budgets[i].Statements, true
}

// Over lists the kinds whose worst request ran more statements than their budget, that have no
// budget, or that were not measured at all.
func (t Table) Over() []string {
	var out []string
	for _, c := range t.Counts {
		b, ok := budgetOf(t.Placement, c.Request)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s: no budget in Budgets (measured %d)", c.Request, c.Max))
		case c.Requests == 0:
			out = append(out, fmt.Sprintf("%s: no request was traced", c.Request))
		case c.Max > b:
			out = append(out, fmt.Sprintf("%s: %d statements, budget %d", c.Request, c.Max, b))
		}
	}
	for _, b := range Budgets {
		if b.Placement == t.Placement && !slices.ContainsFunc(t.Counts, func(c Count) bool { return c.Request == b.Request }) {
			out = append(out, fmt.Sprintf("%s: in Budgets but not measured", b.Request))
		}
	}
	return out
}

// Markdown is the table for docs/evidence/benchmarks.md: per request kind its statements
// (the worst of Reps requests), by backend, the budget, and which statements they were.
func (t Table) Markdown() string {
	var w strings.Builder
	fmt.Fprintf(&w, "| placement | request | statements | by backend | budget | statements run |\n|---|---|---|---|---|---|\n")
	for _, c := range t.Counts {
		b, _ := budgetOf(t.Placement, c.Request)
		fmt.Fprintf(&w, "| %s | %s | %d | %s | %d | %s |\n", t.Placement, c.Request, c.Max, backends(c.Backends), b, names(c.Names))
	}
	return w.String()
}

func backends(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// names collapses repeated statement names: "select.carts ×2".
func names(ns []string) string {
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j < len(ns) && ns[j] == ns[i] {
			j++
		}
		if j-i > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d", ns[i], j-i))
		} else {
			parts = append(parts, ns[i])
		}
		i = j
	}
	return cmp.Or(strings.Join(parts, ", "), "-")
}
