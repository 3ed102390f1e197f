// Package cart owns shopping carts (CRT-1..6): one active cart per owner, item add/replace/remove,
// the guest-to-user merge at login, and marking a cart ordered.
package cart

import (
	"context"
	"errors"
	"time"

	"github.com/shardmart/shardmart/internal/validation"
)

var (
	ErrNotFound = errors.New("cart not found")
	// ErrNotActive means the cart was ordered or abandoned and can no longer change.
	ErrNotActive = errors.New("cart is not active")
)

// Status is a step in a cart's life.
type Status string

const (
	Active    Status = "active"
	Abandoned Status = "abandoned" // a guest cart merged into a user cart at login
	Ordered   Status = "ordered"
)

// Owner is exactly one of a user or a guest session. Backends key carts by owner so the
// active cart is found without a scatter-gather (DESIGN.md note 8).
type Owner struct {
	UserID    string
	SessionID string
}

// User and Guest build owners.
func User(id string) Owner    { return Owner{UserID: id} }
func Guest(id string) Owner   { return Owner{SessionID: id} }
func (o Owner) IsGuest() bool { return o.UserID == "" }

// Key is a stable string form, "u:<id>" or "s:<id>", for storage keys and events.
func (o Owner) Key() string {
	if o.IsGuest() {
		return "s:" + o.SessionID
	}
	return "u:" + o.UserID
}

// ParseOwnerKey reverses Key.
func ParseOwnerKey(k string) (Owner, bool) {
	if len(k) < 3 || k[1] != ':' {
		return Owner{}, false
	}
	switch k[0] {
	case 'u':
		return User(k[2:]), true
	case 's':
		return Guest(k[2:]), true
	}
	return Owner{}, false
}

// MaxQuantity caps one line; a merge that would exceed it is clamped to it.
const MaxQuantity = 999

// MaxItems caps distinct products in one cart.
const MaxItems = 100

// Item is one cart line. Prices are not stored: checkout reads them from the catalog (PRD-4).
type Item struct {
	ProductID string
	Category  string
	Quantity  int64
	AddedAt   time.Time
}

// Cart is the aggregate.
type Cart struct {
	ID        string
	Owner     Owner
	Status    Status
	Items     []Item
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is zero for user carts; a guest cart expires with its session (DESIGN.md note 10).
	ExpiresAt time.Time
	OrderID   string
}

// ValidateQuantity checks a requested line quantity.
func ValidateQuantity(q int64) error {
	if q < 1 || q > MaxQuantity {
		return validation.Field("quantity", "must be between 1 and 999")
	}
	return nil
}

// MergeQuantity is the CRT-5 rule: quantities add, clamped to MaxQuantity.
func MergeQuantity(a, b int64) int64 {
	if s := a + b; s < MaxQuantity {
		return s
	}
	return MaxQuantity
}

// Repository stores carts. Every method is keyed by owner; concurrent PutItem calls for
// different products must both survive (no lost update).
type Repository interface {
	// ActiveCart returns the owner's active cart, or ErrNotFound. Expired guest carts are invisible.
	ActiveCart(ctx context.Context, owner Owner, now time.Time) (Cart, error)
	// PutItem sets a line's quantity (add or replace), creating the active cart if there is none
	// with the given expiry (zero for user carts). Fails with ErrTooManyItems past MaxItems.
	PutItem(ctx context.Context, owner Owner, item Item, expiresAt, now time.Time) (Cart, error)
	// RemoveItem deletes a line; removing an absent line is not an error. ErrNotFound if no cart.
	RemoveItem(ctx context.Context, owner Owner, productID string, now time.Time) (Cart, error)
	// Merge moves the guest session's active cart into the user's active cart (quantities add,
	// MergeQuantity), marks the guest cart Abandoned, and returns the user's cart. With no active
	// guest cart (none, or merged already) it changes nothing: a repeated login is a no-op.
	Merge(ctx context.Context, sessionID, userID string, now time.Time) (Cart, error)
	// MarkOrdered sets the cart Ordered with orderID. Idempotent: repeating it succeeds.
	MarkOrdered(ctx context.Context, owner Owner, cartID, orderID string, now time.Time) error
	// PurgeExpired deletes guest carts past their expiry and returns how many.
	PurgeExpired(ctx context.Context, now time.Time) (int, error)
}

// ErrTooManyItems rejects a cart past MaxItems distinct products.
var ErrTooManyItems = validation.Field("product_id", "cart holds at most 100 distinct products")
