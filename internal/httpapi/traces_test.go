package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/tracing"
)

// newTracedEnv is the API over a real embedded store with tracing as serve sets it up.
func newTracedEnv(tb testing.TB, ratio float64) (*env, *tracing.Tracing) {
	tb.Helper()
	tr, err := tracing.Start(context.Background(), tracing.Config{SampleRatio: ratio})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	e := newEnvOpts(tb, placement.Options{Tracer: tr.Tracer(), Outcome: StoreOutcome}, func(d *Deps) {
		d.Tracer, d.Traces = tr.Tracer(), tr.Recent.Spans
	})
	return e, tr
}

func (e *env) traces(tb testing.TB) []tracing.Span {
	tb.Helper()
	var doc struct {
		Spans []tracing.Span `json:"spans"`
	}
	e.must(tb, http.StatusOK, req{method: "GET", path: "/v1/admin/traces", admin: testAdminToken}).json(tb, &doc)
	return doc.Spans
}

func TestTracesRouteIsAdminOnly(t *testing.T) {
	e, _ := newTracedEnv(t, 1)
	guest := e.guest(t)
	for _, q := range []req{
		{method: "GET", path: "/v1/admin/traces"},
		{method: "GET", path: "/v1/admin/traces", token: guest},
		{method: "GET", path: "/v1/admin/traces", admin: "not-the-token"},
	} {
		r := e.do(t, q)
		if r.status != http.StatusUnauthorized && r.status != http.StatusForbidden {
			t.Errorf("GET /v1/admin/traces (session %t, admin %q): %d, want 401 or 403: %s", q.token != "", q.admin, r.status, r.body)
			continue
		}
		r.problem(t)
	}
	if spans := e.traces(t); len(spans) == 0 {
		t.Error("the admin got no spans, though the guest session's request was traced")
	}
}

func TestTracesRouteWithTracingOff(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, req{method: "GET", path: "/v1/admin/traces", admin: testAdminToken})
	if r.status != http.StatusNotFound {
		t.Fatalf("tracing off: %d, want 404: %s", r.status, r.body)
	}
	if p := r.problem(t); p.Type == "" {
		t.Error("no problem type")
	}
}

// TestTraceOfACartEdit: one PUT of a cart item on the embedded store is one trace, the request
// above the service call above the store operations above their SQL statements, and its
// breakdown adds up against the spans themselves.
func TestTraceOfACartEdit(t *testing.T) {
	e, tr := newTracedEnv(t, 1)
	e.product(t, "p1", "books", "9.99", 10)
	token := e.guest(t)
	before := time.Now()
	e.put(t, token, "p1", 2)

	const route = "PUT /v1/cart/items/{product_id}"
	var trace []tracing.Span
	for _, s := range e.traces(t) {
		if s.ParentID == "" && s.Name == route {
			for _, x := range tr.Recent.Spans() {
				if x.TraceID == s.TraceID {
					trace = append(trace, x)
				}
			}
		}
	}
	if len(trace) == 0 {
		t.Fatalf("no trace named %q", route)
	}
	byID := map[string]tracing.Span{}
	for _, s := range trace {
		byID[s.SpanID] = s
	}
	kind := func(s tracing.Span) string { return s.Attrs[string(tracing.KeyKind)] }
	var root, service, store tracing.Span
	var statements []tracing.Span
	var storeTime time.Duration
	for _, s := range trace {
		switch kind(s) {
		case tracing.KindHTTP:
			root = s
		case tracing.KindService:
			if s.Name == "carts.Put" {
				service = s
			}
		case tracing.KindStore:
			storeTime += s.Duration()
			if s.Name == "carts.put_item" {
				store = s
			}
		case tracing.KindStatement:
			statements = append(statements, s)
		}
	}
	if root.Attrs[string(tracing.KeyStatus)] != "200" || root.Attrs[string(tracing.KeyOutcome)] != "ok" {
		t.Errorf("request span attributes %v, want status 200, outcome ok", root.Attrs)
	}
	if service.ParentID != root.SpanID {
		t.Errorf("carts.Put's parent %q, want the request %q", service.ParentID, root.SpanID)
	}
	if store.ParentID != service.SpanID {
		t.Errorf("carts.put_item's parent %q, want carts.Put %q", store.ParentID, service.SpanID)
	}
	if store.Attrs[string(tracing.KeyBackend)] != "sqlite" || store.Attrs[string(tracing.KeyOp)] != "carts.put_item" ||
		store.Attrs[string(tracing.KeyOutcome)] != "ok" {
		t.Errorf("store span attributes %v", store.Attrs)
	}
	names := map[string]bool{}
	underPut := 0
	for _, s := range statements {
		names[s.Name] = true
		p, ok := byID[s.ParentID]
		if !ok || kind(p) != tracing.KindStore {
			t.Errorf("statement %s's parent %q is not a store operation of the trace", s.Name, p.Name)
		}
		if p.SpanID == store.SpanID {
			underPut++
		}
		if s.Start.Before(p.Start) || s.End.After(p.End) {
			t.Errorf("statement %s [%v, %v] outside its operation %s [%v, %v]", s.Name, s.Start, s.End, p.Name, p.Start, p.End)
		}
		if s.Attrs[string(tracing.KeyBackend)] != "sqlite" {
			t.Errorf("statement %s backend %q", s.Name, s.Attrs[string(tracing.KeyBackend)])
		}
	}
	// The write is a transaction: begin, the cart's statements, commit, all under put_item.
	for _, want := range []string{"begin", "commit", "select.sessions"} {
		if !names[want] {
			t.Errorf("no %s statement among %v", want, names)
		}
	}
	if underPut < 3 {
		t.Errorf("%d statements under carts.put_item, want the transaction's (at least begin, a write, commit)", underPut)
	}

	bs := tracing.Summarize(trace, func(r tracing.Span) bool { return !r.Start.Before(before) })
	if len(bs) != 1 || bs[0].Request != route || bs[0].Requests != 1 {
		t.Fatalf("breakdown %+v, want the one request", bs)
	}
	b := bs[0]
	if b.Mean != root.Duration() {
		t.Errorf("mean %v, want the request span's %v", b.Mean, root.Duration())
	}
	// SQLite runs one statement at a time per request, so the time with a statement in flight
	// is the statements' own durations added up; each lies within its store operation (checked
	// above), so that time is within the store operations', which is within the request's.
	var raw, sum time.Duration
	for _, s := range statements {
		raw += s.Duration()
	}
	n := 0.0
	for _, st := range b.Statements {
		sum += st.Mean
		n += st.PerReq
	}
	if int(n) != len(statements) || sum != raw || raw != b.InStatements {
		t.Errorf("breakdown counts %.0f statements taking %v, busy %v; the trace has %d taking %v", n, sum, b.InStatements, len(statements), raw)
	}
	if b.InStatements > storeTime || storeTime > b.Mean || b.InStatements <= 0 {
		t.Errorf("in statements %v, store operations %v, request %v: want 0 < statements <= store <= request", b.InStatements, storeTime, b.Mean)
	}
}

// TestCheckoutTraceShowsProjectorApply: the order's own follow-ups (read-your-writes) are a
// span of the request, and so are their statements.
func TestCheckoutTraceShowsProjectorApply(t *testing.T) {
	e, tr := newTracedEnv(t, 1)
	e.product(t, "p1", "books", "9.99", 10)
	token, _ := e.user(t)
	e.put(t, token, "p1", 1)
	if r := e.placeOrder(t, token, "k1"); r.status != http.StatusCreated {
		t.Fatalf("place order: %d %s", r.status, r.body)
	}
	spans := tr.Recent.Spans()
	byID := map[string]tracing.Span{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	// underSync finds s's projector.apply ancestor, if any.
	underSync := func(s tracing.Span) (tracing.Span, bool) {
		for p, ok := byID[s.ParentID]; ok; p, ok = byID[p.ParentID] {
			if p.Name == "projector.apply" && p.Attrs[string(tracing.KeyKind)] == tracing.KindSync {
				return p, true
			}
		}
		return tracing.Span{}, false
	}
	var checkout tracing.Span
	for _, s := range spans {
		if s.ParentID == "" && s.Name == "POST /v1/orders" {
			checkout = s
		}
	}
	if checkout.SpanID == "" {
		t.Fatal("no POST /v1/orders trace")
	}
	synced := 0
	for _, s := range spans {
		if s.TraceID != checkout.TraceID || s.Attrs[string(tracing.KeyKind)] != tracing.KindStatement {
			continue
		}
		if sync, ok := underSync(s); ok {
			synced++
			if s.Start.Before(sync.Start) || s.End.After(sync.End) {
				t.Errorf("statement %s [%v, %v] outside projector.apply [%v, %v]", s.Name, s.Start, s.End, sync.Start, sync.End)
			}
		}
	}
	if synced == 0 {
		t.Error("no statement of the checkout ran under projector.apply: the order's follow-ups are not in the trace")
	}
	for _, b := range tracing.Summarize(spans, nil) {
		if b.Request == "POST /v1/orders" {
			if b.Sync <= 0 || b.Sync > b.Mean {
				t.Errorf("projector sync %v of a %v checkout, want within it and above 0", b.Sync, b.Mean)
			}
		}
	}
}

// TestStoreSpanOutcome: a store operation that finds nothing is an answer, read as the metric
// reads it: outcome not_found, and the span is not marked failed.
func TestStoreSpanOutcome(t *testing.T) {
	e, tr := newTracedEnv(t, 1)
	e.must(t, http.StatusOK, req{method: "GET", path: "/v1/cart", token: e.guest(t)})
	for _, s := range tr.Recent.Spans() {
		if s.Name == "carts.active_cart" {
			if got := s.Attrs[string(tracing.KeyOutcome)]; got != "not_found" || s.Error {
				t.Errorf("carts.active_cart of a guest without a cart: outcome %q, failed %t; want not_found, not failed", got, s.Error)
			}
			return
		}
	}
	t.Fatal("no carts.active_cart span")
}

// TestTracesRouteIsNotTraced: reading the traces adds none, so bench's next read finds only
// the workload's.
func TestTracesRouteIsNotTraced(t *testing.T) {
	e, tr := newTracedEnv(t, 1)
	e.guest(t)
	e.traces(t)
	e.traces(t)
	for _, s := range tr.Recent.Spans() {
		if s.Name == tracesRoute {
			t.Fatalf("GET /v1/admin/traces traced itself: %+v", s)
		}
	}
}

// TestAbortedRequestEndsItsSpan: a handler aborting with http.ErrAbortHandler (a proxied body
// cut short) still ends the request's span, so the trace and its children reach the ring.
func TestAbortedRequestEndsItsSpan(t *testing.T) {
	tr, err := tracing.Start(context.Background(), tracing.Config{SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	s := &server{Deps: Deps{Tracer: tr.Tracer()}, log: slog.New(slog.DiscardHandler), metrics: newHTTPMetrics(prometheus.NewRegistry())}
	h := s.wrap("GET /abort", accPublic, func(_ *server, _ http.ResponseWriter, r *http.Request, _ *caller) error {
		_, sp := tracing.Child(r.Context(), "work", tracing.KindService)
		sp.End()
		panic(http.ErrAbortHandler)
	})
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Errorf("recovered %v, want http.ErrAbortHandler re-panicked", v)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/abort", nil))
	}()
	spans := tr.Recent.Spans()
	if len(spans) != 2 || spans[1].Name != "GET /abort" || spans[0].ParentID != spans[1].SpanID {
		t.Fatalf("spans %+v, want the handler's child then the ended request span", spans)
	}
	if got := spans[1].Attrs[string(tracing.KeyOutcome)]; got != "canceled" || !spans[1].Error {
		t.Errorf("aborted request span: outcome %q, failed %t; want canceled, failed", got, spans[1].Error)
	}
}

// TestPanickingServiceCallEndsItsSpan: a service call that panics still ends its span, failed,
// so its request's trace completes.
func TestPanickingServiceCallEndsItsSpan(t *testing.T) {
	tr, err := tracing.Start(context.Background(), tracing.Config{SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	ctx, root := tr.Tracer().Start(context.Background(), "request")
	func() {
		defer func() { _ = recover() }()
		_ = call0(ctx, svcTracer{tr.Tracer()}, "carts.Put", func(context.Context) error { panic("boom") })
	}()
	root.End()
	spans := tr.Recent.Spans()
	if len(spans) != 2 || spans[0].Name != "carts.Put" || spans[0].Attrs[string(tracing.KeyOutcome)] != "error" || !spans[0].Error {
		t.Fatalf("spans %+v, want carts.Put ended failed, then the request", spans)
	}
}
