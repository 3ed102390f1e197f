package placement

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/store"
)

// TestDecoratorsApplyTheBackendsReadingOfErrors: the decorator every repository call passes
// through replaces a failed call's error with what the serving backend's Unavailable makes of
// it, reports that error, and leaves a successful call alone.
func TestDecoratorsApplyTheBackendsReadingOfErrors(t *testing.T) {
	ctx := context.Background()
	raw, mapped := errors.New("not writable primary"), errors.New("unavailable: not writable primary")
	var seen error
	calls := 0
	tm := timer{backend: "b",
		observe: func(_, _ string, _ time.Duration, err error) { seen = err },
		unavailable: func(err error) error {
			calls++
			if err == raw {
				return mapped
			}
			return err
		}}
	err := raw
	tm.done(ctx, "orders.place", time.Now(), &err, nil)
	if err != mapped || seen != mapped {
		t.Errorf("failed call: error %v, observed %v, want both %v", err, seen, mapped)
	}
	err = nil
	tm.done(ctx, "orders.place", time.Now(), &err, nil)
	if err != nil || calls != 1 {
		t.Errorf("successful call: error %v, mapper called %d times, want nil and 1", err, calls)
	}
	// Without an observer (no metrics) the mapping still runs.
	tm.observe, err = nil, raw
	tm.done(ctx, "orders.place", time.Now(), &err, nil)
	if err != mapped {
		t.Errorf("without an observer: error %v, want %v", err, mapped)
	}
}

// TestContextErrorsByWhoseContextEnded: a deadline, or a cancellation while the caller still
// waits, is a transient state named for the family and backend; a cancellation by the caller
// (the client went away) stays what it is.
func TestContextErrorsByWhoseContextEnded(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(live)
	cancel()
	late, stop := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer stop()
	tm := timer{backend: Cassandra, unavailable: unavailable[Cassandra]}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		err    error
		reason string // "": not an UnavailableError
	}{
		{"store's own timeout", live, fmt.Errorf("read cart: %w", context.DeadlineExceeded), "store's own time limit"},
		{"request deadline", late, fmt.Errorf("read cart: %w", context.DeadlineExceeded), "request's deadline"},
		{"cancelled inside the client", live, fmt.Errorf("read cart: %w", context.Canceled), "cancelled inside the store's client"},
		{"cancelled as the deadline passed", late, context.Canceled, "request's deadline"},
		{"client went away", gone, fmt.Errorf("read cart: %w", context.Canceled), ""},
		{"not a context error", live, errors.New("marshal: bad value"), ""},
	} {
		err := tm.transient(tc.ctx, "carts.active_cart", tc.err)
		var ue *store.UnavailableError
		switch {
		case tc.reason == "" && err != tc.err:
			t.Errorf("%s: got %v, want the error unchanged", tc.name, err)
		case tc.reason != "" && !errors.As(err, &ue):
			t.Errorf("%s: got %v, want a store.UnavailableError", tc.name, err)
		case tc.reason != "" && (ue.Family != "carts" || ue.Backend != Cassandra || !strings.Contains(ue.Reason, tc.reason) || !errors.Is(err, tc.err)):
			t.Errorf("%s: got family %q, backend %q, reason %q (%v); want carts, cassandra, a reason naming %q, the cause kept",
				tc.name, ue.Family, ue.Backend, ue.Reason, err, tc.reason)
		}
	}
}

// TestTheFirstFamilyNamedKeepsIt: an error that a repository of another family already named
// (the cart service reading a product) keeps that family through the outer decorator.
func TestTheFirstFamilyNamedKeepsIt(t *testing.T) {
	inner := &store.UnavailableError{Reason: "r", RetryAfter: time.Second, Err: errors.New("x"), Family: "products", Backend: SQLite}
	err := timer{backend: Cassandra}.transient(context.Background(), "carts.put_item", fmt.Errorf("look up product: %w", inner))
	var ue *store.UnavailableError
	if !errors.As(err, &ue) || ue.Family != "products" || ue.Backend != SQLite {
		t.Errorf("got %v, want the products family on sqlite kept", err)
	}
}
