package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/eventually"
)

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.product(t, "p1", "toys", "1.00", 3)
	e.must(t, 200, req{method: "GET", path: "/v1/products/p1"})
	e.must(t, 404, req{method: "GET", path: "/v1/products/p2"})
	e.must(t, 404, req{method: "GET", path: "/nowhere"})
	body := string(e.must(t, 200, req{method: "GET", path: "/metrics"}).body)
	for _, want := range []string{
		`shardmart_http_requests_total{code="2xx",route="GET /v1/products/{id}"} 1`,
		`shardmart_http_requests_total{code="4xx",route="GET /v1/products/{id}"} 1`,
		`shardmart_http_requests_total{code="2xx",route="POST /v1/products"} 1`,
		`shardmart_http_requests_total{code="4xx",route="unmatched"} 1`,
		`shardmart_http_request_duration_seconds_count{code="2xx",route="GET /v1/products/{id}"} 1`,
		// Creating the product appended one outbox message no projector has applied yet.
		`shardmart_outbox_lag_messages 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if _, err := e.projector.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(e.must(t, 200, req{method: "GET", path: "/metrics"}).body), "shardmart_outbox_lag_messages 0") {
		t.Error("lag not 0 after a drain")
	}

	// Registering twice on one registry reuses the collectors instead of panicking.
	_ = New(Deps{Services: e.services, Registry: e.reg, Logger: slog.New(slog.DiscardHandler)})
}

// TestHealthAndReadiness: /readyz pings the placement's real backends and, with one closed,
// answers 503 naming it (not its error, which may carry addresses); /healthz is liveness and
// stays 200.
func TestHealthAndReadiness(t *testing.T) {
	e := newEnv(t)
	h := New(Deps{Services: e.services, Logger: slog.New(slog.DiscardHandler), Ready: e.stores.Ready})
	get := func(path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if rec := get(path); rec.Code != 200 {
			t.Fatalf("%s with the store open: %d %s", path, rec.Code, rec.Body)
		}
	}
	if err := e.stores.Close(); err != nil {
		t.Fatal(err)
	}
	rec := get("/readyz")
	var p Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || rec.Code != 503 || rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("readyz with the store closed: %d %s", rec.Code, rec.Body)
	}
	if p.Detail != "not answering: sqlite" || strings.Contains(rec.Body.String(), "closed") {
		t.Errorf("readyz detail %q: want it to name the sqlite backend and nothing of its error", p.Detail)
	}
	if rec := get("/healthz"); rec.Code != 200 {
		t.Errorf("healthz with the store closed: %d, want 200 (liveness only)", rec.Code)
	}
}

// TestGracefulShutdown: cancelling Serve's context lets an in-flight request finish, refuses
// new connections, and Serve returns nil once the request is done.
func TestGracefulShutdown(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "finished")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, 10*time.Second, slog.New(slog.DiscardHandler)) }()
	url := "http://" + ln.Addr().String() + "/"
	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		res, err := http.Get(url)
		if err != nil {
			got <- result{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		got <- result{string(b), err}
	}()
	<-started
	cancel()
	// Shutdown closes the listener first: new connections fail while the old request runs.
	eventually.True(t, 5*time.Second, "the listener to refuse connections after shutdown began", func() bool {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 200*time.Millisecond)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	select {
	case err := <-done:
		t.Fatalf("Serve returned %v before the in-flight request finished", err)
	default:
	}
	close(release)
	if r := <-got; r.err != nil || r.body != "finished" {
		t.Fatalf("in-flight request: %q, %v", r.body, r.err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
}
