package account_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/account"
)

// A bcrypt comparison keeps a processor busy for its whole length, so no more run at once than
// there are hash slots: a login past them waits for one, gives up when its request ends, and
// every waiting login completes once slots free.
func TestLoginsTakeTurnsForHashSlots(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	if _, err := w.service(w.sessions).Register(ctx, "turns@example.com", "password123"); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	var running, peak atomic.Int32
	restore := account.GateComparisons(gate, &running, &peak)
	defer restore()

	slots := account.HashSlots()
	logins := slots + 2
	errs := make(chan error, logins)
	for range logins {
		go func() {
			_, err := account.Authenticate(ctx, w.stores.Users, "turns@example.com", "password123")
			errs <- err
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); running.Load() < int32(slots); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d comparisons running after 10 s, want %d", running.Load(), slots)
		}
	}

	// Every slot is held: a login whose request ends after its user was read, while it waits
	// for a slot, gets its context's error.
	ending, cancel := context.WithCancel(ctx)
	defer cancel()
	_, err := account.Authenticate(ending, endAfterRead{w.stores.Users, cancel}, "turns@example.com", "password123")
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "hash slot") {
		t.Errorf("login with every slot held, its request ending: %v, want context.Canceled while waiting for a hash slot", err)
	}

	close(gate)
	for range logins {
		if err := <-errs; err != nil {
			t.Errorf("waiting login: %v", err)
		}
	}
	if got := peak.Load(); got != int32(slots) {
		t.Errorf("at most %d comparisons ran at once, want %d (the slots)", got, slots)
	}
}

// endAfterRead ends the request's context once the user is read.
type endAfterRead struct {
	account.Repository
	end context.CancelFunc
}

func (r endAfterRead) UserByEmail(ctx context.Context, email string) (account.User, error) {
	u, err := r.Repository.UserByEmail(ctx, email)
	r.end()
	return u, err
}
