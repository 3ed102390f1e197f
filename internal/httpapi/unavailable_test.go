package httpapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/store"
)

// sickCarts answers every Put with fail's error.
type sickCarts struct {
	Carts
	fail func(ctx context.Context) error
}

func (c sickCarts) Put(ctx context.Context, _ cart.Owner, _ time.Time, _ string, _ int64) (cart.Cart, error) {
	return cart.Cart{}, c.fail(ctx)
}

// TestUnavailableStoreAnswers503WithRetryAfter: a store in a transient state (a failover) is a
// 503 problem with Retry-After in whole seconds, at least one, never a 500.
func TestUnavailableStoreAnswers503WithRetryAfter(t *testing.T) {
	cases := []struct {
		name, retryAfter, detail string
		err                      error
	}{
		{"reason and hint", "2", "NotWritablePrimary", fmt.Errorf("put item: %w", &store.UnavailableError{
			Reason: "the primary stepped down (NotWritablePrimary)", RetryAfter: 1500 * time.Millisecond, Err: errors.New("driver error")})},
		{"sentinel alone", "1", "briefly unavailable", fmt.Errorf("put item: %w", store.ErrUnavailable)},
		{"hint under a second", "1", "election", &store.UnavailableError{Reason: "no primary (election in progress)", RetryAfter: 10 * time.Millisecond, Err: errors.New("x")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnvWith(t, func(d *Deps) {
				d.Carts = sickCarts{Carts: d.Carts, fail: func(context.Context) error { return c.err }}
			})
			e.product(t, "p1", "toys", "2.00", 5)
			r := e.do(t, req{method: "PUT", path: "/v1/cart/items/p1", token: e.guest(t), body: map[string]int64{"quantity": 1}})
			if r.status != 503 {
				t.Fatalf("status %d, want 503: %s", r.status, r.body)
			}
			p := r.problem(t)
			if !strings.HasSuffix(p.Type, "/unavailable") || !strings.Contains(p.Detail, c.detail) || strings.Contains(p.Detail, "driver error") {
				t.Errorf("problem %+v: want type .../unavailable, a detail naming %q and not the cause", p, c.detail)
			}
			if got := r.header.Get("Retry-After"); got != c.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, c.retryAfter)
			}
		})
	}
}

// TestRequestTimeoutBoundsAHangingStore: a store call that would hang with a frozen database
// member gets the request's deadline and the client a 503, not a hung connection.
func TestRequestTimeoutBoundsAHangingStore(t *testing.T) {
	var deadline time.Duration
	e := newEnvWith(t, func(d *Deps) {
		d.RequestTimeout = 200 * time.Millisecond
		d.Carts = sickCarts{Carts: d.Carts, fail: func(ctx context.Context) error {
			if dl, ok := ctx.Deadline(); ok {
				deadline = time.Until(dl)
			}
			<-ctx.Done()
			return fmt.Errorf("put item: %w", ctx.Err())
		}}
	})
	e.product(t, "p1", "toys", "2.00", 5)
	guest := e.guest(t)
	began := time.Now()
	r := e.do(t, req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: map[string]int64{"quantity": 1}})
	took := time.Since(began)
	if r.status != 503 || took > 10*time.Second {
		t.Fatalf("status %d after %s, want 503 once the 200 ms deadline passed: %s", r.status, took, r.body)
	}
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	if deadline <= 0 || deadline > 200*time.Millisecond {
		t.Errorf("the store saw a deadline %s ahead, want at most the request timeout 200ms", deadline)
	}
}
