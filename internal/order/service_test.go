package order

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/store"
)

// failingOrders fails every Place with err; no key has placed an order.
type failingOrders struct{ err error }

func (r failingOrders) Place(context.Context, Placement) (Order, bool, error) {
	return Order{}, false, r.err
}
func (failingOrders) GetOrder(context.Context, string) (Order, error) { return Order{}, ErrNotFound }
func (failingOrders) ByIdempotencyKey(context.Context, string, string) (Order, error) {
	return Order{}, ErrNotFound
}
func (failingOrders) Transition(context.Context, string, Status, time.Time) (Order, error) {
	return Order{}, ErrNotFound
}
func (failingOrders) FenceCart(context.Context, string) (string, error) { return "", nil }

// oneCart hands out one cart with one line and records the checkouts released.
type oneCart struct {
	mu    sync.Mutex
	ended []string
}

func (c *oneCart) BeginCheckout(_ context.Context, _ cart.Owner, orderID string) (cart.Cart, error) {
	return cart.Cart{ID: "cart1", CheckoutOrder: orderID,
		Items: []cart.Item{{ProductID: "p1", Category: "tools", Quantity: 2}}}, nil
}

func (c *oneCart) EndCheckout(_ context.Context, _ cart.Owner, cartID, _ string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ended = append(c.ended, cartID)
	return nil
}

func TestFailedCheckoutReleasesTheCartOnlyWhenNothingCommitted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		release bool
	}{
		{"insufficient stock", &catalog.InsufficientStockError{ProductID: "p1", Zone: "eu", Requested: 2}, true},
		{"product gone", fmt.Errorf("read: %w", catalog.ErrNotFound), true},
		{"aborted, outcome open", &store.UnavailableError{Reason: "r", RetryAfter: time.Second,
			Err: errors.New("unconfirmed refusal"), Aborted: true}, true},
		{"unavailable, maybe committed", &store.UnavailableError{Reason: "r", RetryAfter: time.Second,
			Err: errors.New("commit outcome unknown")}, false},
		{"deadline", context.DeadlineExceeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			carts := &oneCart{}
			s := &Service{Orders: failingOrders{err: tc.err}, Carts: carts, Now: time.Now}
			_, _, err := s.PlaceFromCart(context.Background(), "alice", "eu", "key-1")
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want the store's error %v", err, tc.err)
			}
			if released := len(carts.ended) == 1 && carts.ended[0] == "cart1"; released != tc.release {
				t.Errorf("cart released: %v (EndCheckout %v), want %v", released, carts.ended, tc.release)
			}
		})
	}
}
