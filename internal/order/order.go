// Package order owns orders: placement from a cart with atomic stock decrement (ORD-1),
// idempotent retries, and the status state machine (ORD-3).
package order

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/money"
)

var (
	ErrNotFound          = errors.New("order not found")
	ErrIllegalTransition = errors.New("illegal status transition")
	ErrEmptyCart         = errors.New("cart is empty")
	// ErrCartAlreadyOrdered guards against two orders from one cart when the cart lives
	// in another store and is marked ordered asynchronously by the projector.
	ErrCartAlreadyOrdered = errors.New("cart has already been ordered")
	// ErrKeyReused refuses a retry whose request differs from the one the key first placed.
	ErrKeyReused = errors.New("idempotency key was already used with a different request")
)

// Status is a step of the order life cycle.
type Status string

const (
	Created   Status = "created"
	Paid      Status = "paid"
	Shipped   Status = "shipped"
	Delivered Status = "delivered"
	Cancelled Status = "cancelled"
)

var transitions = map[Status][]Status{
	Created: {Paid, Cancelled},
	Paid:    {Shipped, Cancelled},
	Shipped: {Delivered},
}

// ParseStatus accepts a known status name.
func ParseStatus(s string) (Status, bool) {
	switch st := Status(s); st {
	case Created, Paid, Shipped, Delivered, Cancelled:
		return st, true
	}
	return "", false
}

// CanTransition reports whether from -> to is an edge of the state machine.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Item is one order line, priced from the catalog at placement time (PRD-4).
type Item struct {
	ProductID string       `json:"product_id"`
	Category  string       `json:"category"`
	Name      string       `json:"name"`
	Quantity  int64        `json:"quantity"`
	UnitPrice money.Amount `json:"unit_price"`
}

// Order is the aggregate stored in the transactional store.
// Its JSON form is the outbox payload of order events.
type Order struct {
	ID             string       `json:"id"`
	UserID         string       `json:"user_id"`
	CartID         string       `json:"cart_id"`
	Zone           string       `json:"zone"`
	Items          []Item       `json:"items"`
	Total          money.Amount `json:"total"`
	Status         Status       `json:"status"`
	IdempotencyKey string       `json:"idempotency_key"`
	CreatedAt      time.Time    `json:"created_at"`
	UpdatedAt      time.Time    `json:"updated_at"`
}

// TransitionTo applies a status change, enforcing the state machine.
func (o *Order) TransitionTo(to Status, at time.Time) error {
	if !CanTransition(o.Status, to) {
		return fmt.Errorf("%w: %s -> %s", ErrIllegalTransition, o.Status, to)
	}
	o.Status = to
	o.UpdatedAt = at
	return nil
}

// Restocks reports whether moving to `to` returns the items to stock.
func Restocks(to Status) bool { return to == Cancelled }

// Line is what the cart asks for; the repository prices it.
type Line struct {
	ProductID string
	Category  string
	Quantity  int64
}

// Placement is everything Place needs. OrderID is chosen by the caller so that a retry
// after an unknown commit outcome reuses it.
type Placement struct {
	OrderID        string
	UserID         string
	CartID         string
	CartOwner      string // cart owner key, carried into the outbox event for the projector
	Zone           string
	IdempotencyKey string
	Lines          []Line
	At             time.Time
}

// Repository is the transactional order store. Place must, in ONE transaction: return the
// existing order if (UserID, IdempotencyKey) was used before; refuse a second order for
// CartID; read current prices; decrement stock in Zone without going below zero
// (*catalog.InsufficientStockError naming the item); insert the order; and append an
// outbox event (outbox.TopicOrderPlaced). created is false when an existing order is returned.
type Repository interface {
	Place(ctx context.Context, p Placement) (o Order, created bool, err error)
	GetOrder(ctx context.Context, id string) (Order, error)
	ByIdempotencyKey(ctx context.Context, userID, key string) (Order, error)
	// Transition changes the status, restocks on cancel, and appends an outbox event
	// (outbox.TopicOrderStatus), all in one transaction.
	Transition(ctx context.Context, id string, to Status, at time.Time) (Order, error)
}
