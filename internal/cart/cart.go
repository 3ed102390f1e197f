// Package cart owns shopping carts (CRT-1..6): one active cart per owner, item add/replace/remove,
// the guest-to-user merge at login, and marking a cart ordered.
package cart

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/validation"
)

var (
	ErrNotFound = errors.New("cart not found")
	// ErrNotActive means the cart was ordered or abandoned and can no longer change.
	ErrNotActive = errors.New("cart is not active")
	// ErrCheckoutInProgress refuses a change to a cart an order is being placed from: the order
	// will hold exactly what the cart held when checkout began.
	ErrCheckoutInProgress = errors.New("checkout in progress: the cart cannot change until the order is placed or fails")
	// ErrGuestMerged refuses a change to a guest cart after its session logged in: its lines
	// now belong to the user's cart, and a new guest cart would never be seen again.
	ErrGuestMerged = errors.New("this session has logged in; its cart was merged into the user's cart")
	// ErrProductInactive refuses to put a product that is no longer on sale into a cart.
	ErrProductInactive = errors.New("product is not on sale (inactive)")
)

// StaleCheckoutError reports a cart still frozen by a checkout whose lease ran out (its process
// died or stalled). Whether that checkout placed its order is for the order store to say: the
// cart service fences the order store and then either marks the cart ordered or reopens it.
type StaleCheckoutError struct {
	CartID  string
	OrderID string // the order the stale checkout meant to place
}

func (e *StaleCheckoutError) Error() string {
	return fmt.Sprintf("cart %s: checkout of order %s outlived its lease", e.CartID, e.OrderID)
}

// Status is a step in a cart's life.
type Status string

const (
	Active    Status = "active"
	Abandoned Status = "abandoned" // a guest cart merged into a user cart at login
	Ordered   Status = "ordered"
)

// Owner is exactly one of a user or a guest session. Backends key carts by owner so the
// active cart is found without a scatter-gather.
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
	// ExpiresAt is zero for user carts; a guest cart expires with its session.
	ExpiresAt time.Time
	OrderID   string
	// CheckoutOrder and CheckoutUntil are set while a checkout holds the cart: the order it is
	// placing (the freeze's token) and the end of its lease.
	CheckoutOrder string
	CheckoutUntil time.Time
}

// Editable is the rule every change to a cart applies to the state it has just read: a cart
// frozen by a live checkout refuses (ErrCheckoutInProgress); one frozen by a checkout whose
// lease ran out must first be resolved (*StaleCheckoutError).
func (c Cart) Editable(now time.Time) error {
	if c.CheckoutOrder == "" {
		return nil
	}
	if now.Before(c.CheckoutUntil) {
		return ErrCheckoutInProgress
	}
	return &StaleCheckoutError{CartID: c.ID, OrderID: c.CheckoutOrder}
}

// CheckoutLease bounds how long a checkout may hold a cart. The order service gives the order
// store less than this (CheckoutPlaceTimeout), so a lease never runs out under a live commit.
const CheckoutLease = 30 * time.Second

// ValidateQuantity checks a requested line quantity.
func ValidateQuantity(q int64) error {
	if q < 1 || q > MaxQuantity {
		return validation.Field("quantity", "must be between 1 and 999")
	}
	return nil
}

// MergeLines is CRT-5, the one place it is written: guest lines join the user's lines in the
// guest's order; a product both hold has its quantities added, clamped to MaxQuantity; a new
// product joins while the cart has fewer than MaxItems lines. What did not fit (a whole line
// past MaxItems, or the part of a quantity past MaxQuantity) is returned in notMerged, so the
// caller can tell the user. The inputs are not modified.
func MergeLines(user, guest []Item) (merged, notMerged []Item) {
	merged = append(make([]Item, 0, len(user)+len(guest)), user...)
	at := make(map[string]int, len(merged))
	for i, it := range merged {
		at[it.ProductID] = i
	}
	for _, g := range guest {
		i, ok := at[g.ProductID]
		if !ok {
			if len(merged) >= MaxItems {
				notMerged = append(notMerged, g)
				continue
			}
			i = len(merged)
			at[g.ProductID] = i
			merged = append(merged, Item{ProductID: g.ProductID, Category: g.Category, AddedAt: g.AddedAt})
		}
		sum := merged[i].Quantity + g.Quantity
		if sum > MaxQuantity {
			rest := g
			rest.Quantity = sum - MaxQuantity
			notMerged = append(notMerged, rest)
			sum = MaxQuantity
		}
		merged[i].Quantity = sum
	}
	return merged, notMerged
}

// MergeResult is the user's cart after a merge and the guest lines that did not fit.
type MergeResult struct {
	Cart      Cart
	NotMerged []Item
}

// Repository stores carts. Every method is keyed by owner; concurrent PutItem calls for
// different products must both survive (no lost update). PutItem, RemoveItem and Merge apply
// Cart.Editable to the cart they change inside their own transaction (or LWT), so a change
// either happens before a checkout freezes the cart or is refused; a guest's changes after
// its cart was merged fail with ErrGuestMerged.
type Repository interface {
	// ActiveCart returns the owner's active cart, or ErrNotFound. Expired guest carts are invisible.
	//dualwrite:read
	ActiveCart(ctx context.Context, owner Owner, now time.Time) (Cart, error)
	// PutItem sets a line's quantity (add or replace), creating the active cart if there is none
	// with the given expiry (zero for user carts). Fails with ErrTooManyItems past MaxItems.
	//dualwrite:write
	PutItem(ctx context.Context, owner Owner, item Item, expiresAt, now time.Time) (Cart, error)
	// RemoveItem deletes a line; removing an absent line is not an error. ErrNotFound if no cart.
	//dualwrite:write
	RemoveItem(ctx context.Context, owner Owner, productID string, now time.Time) (Cart, error)
	// Merge moves the guest session's active cart into the user's active cart by MergeLines,
	// marks the guest cart Abandoned, and returns the user's cart and what did not fit. With no
	// active guest cart (none, or merged already) it changes nothing: a repeated login is a
	// no-op. ErrNotFound when neither cart exists.
	//dualwrite:custom
	Merge(ctx context.Context, sessionID, userID string, now time.Time) (MergeResult, error)
	// BeginCheckout freezes the owner's live active cart for the checkout placing orderID until
	// `until`, and returns it frozen: its lines are what the order will hold. ErrNotFound
	// without a live cart; Editable's errors when another checkout holds it.
	//dualwrite:write
	BeginCheckout(ctx context.Context, owner Owner, orderID string, until, now time.Time) (Cart, error)
	// EndCheckout unfreezes cartID if the checkout placing orderID still holds it: that
	// checkout failed for certain and placed nothing. Otherwise it does nothing.
	//dualwrite:write
	EndCheckout(ctx context.Context, owner Owner, cartID, orderID string, now time.Time) error
	// Reopen ends a cart whose stale checkout was fenced off in the order store (it can never be
	// ordered now) and starts a new active cart with its lines, which it returns. If cartID is
	// no longer the owner's active cart it changes nothing and returns the current one.
	//dualwrite:write
	Reopen(ctx context.Context, owner Owner, cartID string, now time.Time) (Cart, error)
	// MarkOrdered sets the cart Ordered with orderID, frozen or not. Idempotent.
	//dualwrite:write
	MarkOrdered(ctx context.Context, owner Owner, cartID, orderID string, now time.Time) error
	// PurgeExpired deletes guest carts past their expiry and returns how many.
	//dualwrite:unmirrored
	PurgeExpired(ctx context.Context, now time.Time) (int, error)
}

// ErrTooManyItems rejects a cart past MaxItems distinct products.
var ErrTooManyItems = validation.Field("product_id", "cart holds at most 100 distinct products")
