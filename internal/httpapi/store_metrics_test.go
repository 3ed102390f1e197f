package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/session"
)

// TestStoreOperationMetric opens the embedded placement with the serve command's store hooks
// and checks the series a few repository calls leave: backend, op and outcome.
func TestStoreOperationMetric(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	s := observedStores(t, reg)
	now := time.Now()
	if err := s.Sessions.CreateSession(ctx, session.Session{ID: "s1", CreatedAt: now, LastActive: now, ExpiresAt: now.Add(time.Hour), Status: session.StatusActive}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sessions.GetSession(ctx, "s1", now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Carts.ActiveCart(ctx, cart.Guest("s1"), now); !errors.Is(err, cart.ErrNotFound) {
		t.Fatalf("active cart of a new session: %v", err)
	}
	if _, err := s.Catalog.GetProduct(ctx, "nope"); err == nil {
		t.Fatal("an absent product was found")
	}
	if _, err := s.Outbox.LastSeq(ctx); err != nil {
		t.Fatal(err)
	}

	want := []string{
		"sqlite carts.active_cart not_found 1",
		"sqlite catalog.get_product not_found 1",
		"sqlite outbox.last_seq ok 1",
		"sqlite sessions.create_session ok 1",
		"sqlite sessions.get_session ok 1",
	}
	if got := storeSeries(t, reg, "shardmart_store_operation_duration_seconds"); !slices.Equal(got, want) {
		t.Errorf("store operation series:\n got %q\nwant %q", got, want)
	}
	// SQLite has no statement layer of its own: the statement metric stays empty.
	if n := testutil.CollectAndCount(reg, "shardmart_store_statement_duration_seconds"); n != 0 {
		t.Errorf("statement series on SQLite = %d, want 0", n)
	}
}

// TestStoreOutcomes: only a store failure is an error outcome; the domain's expected answers
// (nothing there, a rule refusing the call, a caller gone) have outcomes of their own.
func TestStoreOutcomes(t *testing.T) {
	reg := prometheus.NewRegistry()
	observe := NewStoreObserver(reg)
	for _, c := range []struct {
		op  string
		err error
	}{
		{"carts.put_item", nil},
		{"carts.merge", fmt.Errorf("sqlite: merge: %w", cart.ErrNotFound)},
		{"sessions.get_session", session.ErrNotFound},
		{"users.by_email", account.ErrNotFound},
		{"orders.get_order", order.ErrNotFound},
		{"catalog.get_product", catalog.ErrNotFound},
		{"orders.place", &catalog.InsufficientStockError{ProductID: "p", Zone: "eu", Requested: 2, Available: 1}},
		{"users.create", fmt.Errorf("wrapped: %w", account.ErrEmailTaken)},
		{"carts.put_item", cart.ErrCheckoutInProgress},
		{"orders.transition", order.ErrIllegalTransition},
		{"carts.begin_checkout", &cart.StaleCheckoutError{CartID: "c", OrderID: "o"}},
		{"carts.put_item", cart.ErrTooManyItems},
		{"carts.active_cart", fmt.Errorf("scan: %w", context.Canceled)},
		{"carts.active_cart", fmt.Errorf("query: %w", context.DeadlineExceeded)},
		{"carts.put_item", errors.New("database is locked")},
	} {
		observe("sqlite", c.op, time.Millisecond, c.err)
	}
	want := []string{
		"sqlite carts.active_cart canceled 1",
		"sqlite carts.active_cart error 1",
		"sqlite carts.begin_checkout rejected 1",
		"sqlite carts.merge not_found 1",
		"sqlite carts.put_item error 1",
		"sqlite carts.put_item ok 1",
		"sqlite carts.put_item rejected 2",
		"sqlite catalog.get_product not_found 1",
		"sqlite orders.get_order not_found 1",
		"sqlite orders.place rejected 1",
		"sqlite orders.transition rejected 1",
		"sqlite sessions.get_session not_found 1",
		"sqlite users.by_email not_found 1",
		"sqlite users.create rejected 1",
	}
	if got := storeSeries(t, reg, "shardmart_store_operation_duration_seconds"); !slices.Equal(got, want) {
		t.Errorf("store operation series:\n got %q\nwant %q", got, want)
	}
}

// TestLoginWithoutGuestCartIsNoStoreError logs users in through the API, wired as serve wires
// it: a login whose session has no guest cart finds nothing to merge, which is no store error.
func TestLoginWithoutGuestCartIsNoStoreError(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := observedStores(t, reg)
	d, _ := wire(s, testAdminToken, slog.New(slog.DiscardHandler))
	d.Ready = func(context.Context) error { return nil }
	srv := httptest.NewServer(New(d))
	defer srv.Close()
	e := &env{srv: srv, stores: s, client: srv.Client()}
	e.seedProduct(t, "p1", "books", 500, 10)

	// 1: neither the guest nor the user has a cart.
	token := e.guest(t)
	email := "merge-metric@example.com"
	e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/users", token: token,
		body: map[string]string{"email": email, "password": "password123"}})
	userToken := e.login(t, token, email, "password123")
	// 2: the user has a cart, the new guest session none.
	e.put(t, userToken, "p1", 1)
	e.login(t, e.guest(t), email, "password123")
	// 3: the guest has a cart: a real merge.
	guest := e.guest(t)
	e.put(t, guest, "p1", 2)
	e.login(t, guest, email, "password123")

	merges := map[string]float64{}
	for _, line := range storeSeries(t, reg, "shardmart_store_operation_duration_seconds") {
		f := strings.Fields(line)
		if f[1] == "carts.merge" {
			n, _ := strconv.ParseFloat(f[3], 64)
			merges[f[2]] = n
		}
		if f[2] == outcomeError {
			t.Errorf("store error outcome after normal logins: %s", line)
		}
	}
	if want := map[string]float64{"not_found": 1, "ok": 2}; !maps.Equal(merges, want) {
		t.Errorf("carts.merge by outcome = %v, want %v", merges, want)
	}
	if n := testutil.CollectAndCount(reg, "shardmart_store_operation_duration_seconds"); n == 0 {
		t.Fatal("no store operation series: the observer is not wired")
	}
}

func TestStatementMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	observe := NewStatementObserver(reg)
	observe("cassandra", "select.user_carts", 3*time.Millisecond, nil)
	observe("cassandra", "select.user_carts", time.Millisecond, nil)
	observe("mongo", "find", time.Millisecond, errors.New("boom"))
	want := []string{"cassandra select.user_carts ok 2", "mongo find error 1"}
	if got := storeSeries(t, reg, "shardmart_store_statement_duration_seconds"); !slices.Equal(got, want) {
		t.Errorf("statement series:\n got %q\nwant %q", got, want)
	}
	// Registering twice on one registry reuses the collectors instead of panicking.
	_ = NewStatementObserver(reg)
	_ = NewStoreObserver(reg)
	_ = NewStoreObserver(reg)
}

// observedStores opens the embedded placement with the serve command's store hooks on reg.
func observedStores(t *testing.T, reg *prometheus.Registry) *placement.Stores {
	t.Helper()
	s, err := placement.Open(context.Background(), placement.Embedded(), placement.Options{
		SQLitePath:       filepath.Join(t.TempDir(), "m.db"),
		Observe:          NewStoreObserver(reg),
		ObserveStatement: NewStatementObserver(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// storeSeries renders each histogram series of name as "backend op-or-statement outcome count",
// sorted; durations vary from run to run, counts do not.
func storeSeries(t *testing.T, reg *prometheus.Registry, name string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			what := labels["op"] + labels["statement"]
			out = append(out, labels["backend"]+" "+what+" "+labels["outcome"]+" "+
				strconv.FormatUint(m.GetHistogram().GetSampleCount(), 10))
		}
	}
	slices.Sort(out)
	return out
}

// BenchmarkStoreObserver: one store call's observation, as every repository call makes, over
// the few series a request touches.
func BenchmarkStoreObserver(b *testing.B) {
	observe := NewStoreObserver(prometheus.NewRegistry())
	ops := []string{"sessions.get_session", "catalog.search_products", "carts.put_item", "catalog.get_product"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		observe("sqlite", ops[i%len(ops)], time.Millisecond, nil)
		i++
	}
}
