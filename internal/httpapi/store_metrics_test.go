package httpapi

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/session"
)

// TestStoreOperationMetric opens the embedded placement with the serve command's store hooks
// and checks the series a few repository calls leave: backend, op and outcome.
func TestStoreOperationMetric(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	s, err := placement.Open(ctx, placement.Embedded(), placement.Options{
		SQLitePath:       filepath.Join(t.TempDir(), "m.db"),
		Observe:          NewStoreObserver(reg),
		ObserveStatement: NewStatementObserver(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
		"sqlite carts.active_cart error 1",
		"sqlite catalog.get_product error 1",
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
