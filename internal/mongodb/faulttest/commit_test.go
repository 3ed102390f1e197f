package faulttest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/catalog"
	storeerr "github.com/shardmart/shardmart/internal/store"
	store "github.com/shardmart/shardmart/internal/store/mongostore"
)

// TestCommitToAFrozenPrimaryKeepsTheDeadline freezes the primary exactly as a transaction's
// commitTransaction is sent: the store must answer at the caller's deadline (unavailable, the
// outcome unknown), not when the primary resumes. The driver's convenient transaction API
// commits without the caller's deadline; a watchdog resumes the member after resumeAfter so a
// store that waits for it fails this test in bounded time instead of hanging it.
func TestCommitToAFrozenPrimaryKeepsTheDeadline(t *testing.T) {
	const (
		deadline    = 2 * time.Second
		resumeAfter = 12 * time.Second
		// The session's end aborts for at most 1 s (mongostore's abortWait); the rest is for
		// scheduling at high load.
		margin = 2 * time.Second
	)
	ctx := start(t)
	_, db := openStore(t, ctx, "commit") // the schema
	victim := set.Primary(ctx)
	if victim < 0 {
		t.Fatal("no primary")
	}
	var armed, paused atomic.Bool
	opts := store.ClientOptions(set.URI()).SetMonitor(&mongoevent.CommandMonitor{
		Started: func(_ context.Context, e *mongoevent.CommandStartedEvent) {
			// Called before the command is written: the member is frozen when it arrives.
			if e.CommandName == "commitTransaction" && armed.CompareAndSwap(true, false) {
				if err := set.Pause(victim); err != nil {
					t.Errorf("pause member %d: %v", victim, err)
					return
				}
				paused.Store(true)
				time.AfterFunc(resumeAfter, func() { _ = set.Resume(victim) })
			}
		},
	})
	client, err := mongo.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = client.Disconnect(dctx)
	})
	// Registered after start's restore, so it runs before it.
	t.Cleanup(func() { _ = set.Resume(victim) })
	s := store.New(client, store.Options{Database: db})
	now := time.Now().UTC().Truncate(time.Millisecond)
	p := catalog.Product{ID: "frozen-commit", Name: "frozen commit", Category: "faulttest", Price: 100,
		Stock: map[string]int64{zone: 1}, CreatedAt: now, UpdatedAt: now}

	armed.Store(true)
	cctx, cancel := context.WithTimeout(ctx, deadline)
	began := time.Now()
	err = s.Products().CreateProduct(cctx, p)
	took := time.Since(began)
	cancel()
	if !paused.Load() {
		t.Fatalf("no commit was sent (err %v)", err)
	}
	t.Logf("commit to the frozen member %d answered after %s: %v", victim, took.Round(time.Millisecond), err)
	if err == nil {
		t.Fatal("a commit to a frozen primary was acknowledged")
	}
	if !errors.Is(store.Unavailable(err), storeerr.ErrUnavailable) {
		t.Errorf("error %v is not answered as unavailable (503)", err)
	}
	if limit := deadline + margin; took > limit {
		t.Errorf("the store answered %s after the call, want at most its %s deadline + %s: the commit ignored the deadline",
			took.Round(time.Millisecond), deadline, margin)
	}
}
