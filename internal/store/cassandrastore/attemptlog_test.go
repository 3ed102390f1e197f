package cassandrastore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/session"
)

// Each attempt of a logged call reaches the call's log with its statement, level, coordinator,
// timing and outcome, lightweight transactions marked; a call without a log reports nothing to
// another call's.
func TestAttemptLog(t *testing.T) {
	st := store(t)
	var (
		mu  sync.Mutex
		got []Attempt
	)
	ctx := WithAttemptLog(context.Background(), func(a Attempt) {
		mu.Lock()
		got = append(got, a)
		mu.Unlock()
	})
	now := time.Now().UTC().Truncate(time.Millisecond)
	s := session.Session{ID: fmt.Sprintf("attemptlog-%d", now.UnixNano()), CreatedAt: now, LastActive: now,
		ExpiresAt: now.Add(time.Hour), Status: session.StatusActive}
	if err := st.Sessions().CreateSession(context.Background(), s); err != nil { // not logged
		t.Fatal(err)
	}
	s.ID += "-logged"
	if err := st.Sessions().CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Carts().PutItem(ctx, cart.User(s.ID), cart.Item{ProductID: "p1", Category: "c", Quantity: 2}, time.Time{}, time.Now()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	inserts := 0
	for _, a := range got {
		if a.Host != testHosts[0] || !a.HostUp || a.Err != nil || a.End.Before(a.Start) || a.Start.Before(now) {
			t.Errorf("attempt %s: want host %s up, no error, a start after %s and an end after it", a, testHosts[0], now.Format(time.StampMilli))
		}
		if a.Statement == "insert.sessions" {
			inserts++
			if a.Consistency != "QUORUM" || a.LWT || a.N != 0 {
				t.Errorf("session insert attempt %s: want QUORUM (sessions are created at a quorum), no LWT, the first attempt", a)
			}
		}
	}
	if inserts != 1 {
		t.Errorf("%d session insert attempts logged, want 1 (the logged call's): %v", inserts, got)
	}
	if !slices.ContainsFunc(got, func(a Attempt) bool { return a.LWT && a.Consistency == "QUORUM" }) {
		t.Errorf("no lightweight transaction logged for the cart put: %v", got)
	}
}
