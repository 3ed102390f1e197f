// Package order owns orders: placement from a cart with atomic stock decrement (ORD-1),
// idempotent retries, and the status state machine (ORD-3).
package order

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/validation"
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

// Priced is a line with the catalog's values as the placing transaction read them (PRD-4).
type Priced struct {
	Line
	Name      string
	UnitPrice money.Amount
}

// ValidatePlacement checks what a backend is asked to place: a zone slug and at least one
// line, each a distinct product with a category and a quantity a cart can hold.
func ValidatePlacement(p Placement) error {
	var c validation.Collector
	c.Check(catalog.ValidSlug(p.Zone), "zone", "must be a zone slug such as \"eu-west\"")
	if len(p.Lines) == 0 {
		return ErrEmptyCart
	}
	seen := make(map[string]bool, len(p.Lines))
	for _, l := range p.Lines {
		c.Check(l.ProductID != "" && !seen[l.ProductID], "items", "each line must name a distinct product")
		c.Check(l.Category != "", "items", "each line must carry its product's category")
		c.Check(l.Quantity >= 1 && l.Quantity <= cart.MaxQuantity, "quantity", "must be between 1 and 999")
		seen[l.ProductID] = true
	}
	return c.Err()
}

// New builds the order a placement makes from its priced lines, in the placement's order:
// items at the prices read, the total their sum. Backends call it inside the transaction that
// read the prices and took the stock, and persist what it returns.
func New(p Placement, lines []Priced) (Order, error) {
	o := Order{ID: p.OrderID, UserID: p.UserID, CartID: p.CartID, Zone: p.Zone, Status: Created,
		IdempotencyKey: p.IdempotencyKey, CreatedAt: p.At, UpdatedAt: p.At, Items: make([]Item, 0, len(lines))}
	for _, l := range lines {
		sub, err := l.UnitPrice.Mul(l.Quantity)
		if err == nil {
			o.Total, err = o.Total.Add(sub)
		}
		if err != nil {
			return Order{}, fmt.Errorf("order %s total: %w", p.OrderID, err)
		}
		o.Items = append(o.Items, Item{ProductID: l.ProductID, Category: l.Category, Name: l.Name,
			Quantity: l.Quantity, UnitPrice: l.UnitPrice})
	}
	return o, nil
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
// CartID, or one fenced by FenceCart (ErrCartAlreadyOrdered); read current prices; decrement
// stock in Zone without going below zero (*catalog.InsufficientStockError naming the item);
// build the order with New; insert it; and append an outbox event (outbox.TopicOrderPlaced).
// created is false when an existing order is returned. Place checks ValidatePlacement first.
type Repository interface {
	Place(ctx context.Context, p Placement) (o Order, created bool, err error)
	GetOrder(ctx context.Context, id string) (Order, error)
	ByIdempotencyKey(ctx context.Context, userID, key string) (Order, error)
	// Transition changes the status, restocks on cancel, and appends an outbox event
	// (outbox.TopicOrderStatus), all in one transaction.
	Transition(ctx context.Context, id string, to Status, at time.Time) (Order, error)
	// FenceCart settles a checkout whose cart lease ran out: it returns the id of the order
	// placed from cartID, or, if there is none, records that none may ever be ("" and nil;
	// a later Place for the cart fails with ErrCartAlreadyOrdered). Idempotent.
	FenceCart(ctx context.Context, cartID string) (orderID string, err error)
}
