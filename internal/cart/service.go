package cart

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
)

// ProductLookup is what carts need from the catalog: that the product exists, and its category.
type ProductLookup interface {
	GetProduct(ctx context.Context, id string) (catalog.Product, error)
}

// OrderFence is what carts need from the order store to settle a checkout that outlived its
// lease: FenceCart returns the order placed from cartID, or, if there is none, makes sure none
// ever will be ("" and nil).
type OrderFence interface {
	FenceCart(ctx context.Context, cartID string) (orderID string, err error)
}

// Service runs the cart use cases.
type Service struct {
	Carts    Repository
	Products ProductLookup
	Orders   OrderFence
	Now      func() time.Time
}

// settleAttempts bounds the settle-and-retry loops: each round settles one stale checkout.
const settleAttempts = 3

// retrySettled runs op, and when it meets a cart frozen by a stale checkout, settles that
// checkout and runs op again: the change then lands in the reopened (or a new) cart.
func retrySettled[T any](ctx context.Context, s *Service, owner Owner, op func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := op()
		var stale *StaleCheckoutError
		if !errors.As(err, &stale) || attempt == settleAttempts {
			return v, err
		}
		if err := s.settle(ctx, owner, stale); err != nil {
			return v, err
		}
	}
}

// settle ends a stale checkout: the order store either already holds its order (the cart is
// marked ordered, as the projector would) or is fenced so it never will (the cart reopens).
func (s *Service) settle(ctx context.Context, owner Owner, stale *StaleCheckoutError) error {
	if s.Orders == nil {
		return fmt.Errorf("settle %w: no order store to ask", stale)
	}
	orderID, err := s.Orders.FenceCart(ctx, stale.CartID)
	if err != nil {
		return fmt.Errorf("settle stale checkout of cart %s: %w", stale.CartID, err)
	}
	now := s.Now().UTC()
	if orderID != "" {
		return s.Carts.MarkOrdered(ctx, owner, stale.CartID, orderID, now)
	}
	_, err = s.Carts.Reopen(ctx, owner, stale.CartID, now)
	return err
}

// Get returns the owner's active cart; an owner without one sees an empty cart.
func (s *Service) Get(ctx context.Context, owner Owner) (Cart, error) {
	c, err := s.Carts.ActiveCart(ctx, owner, s.Now().UTC())
	if errors.Is(err, ErrNotFound) {
		return Cart{Owner: owner, Status: Active}, nil
	}
	return c, err
}

// Put sets a product's quantity in the owner's cart (CRT-1, CRT-3). expiresAt ties a guest
// cart to its session; it is ignored for users.
func (s *Service) Put(ctx context.Context, owner Owner, expiresAt time.Time, productID string, qty int64) (Cart, error) {
	if err := ValidateQuantity(qty); err != nil {
		return Cart{}, err
	}
	p, err := s.Products.GetProduct(ctx, productID)
	if err != nil {
		return Cart{}, fmt.Errorf("look up product: %w", err)
	}
	if p.Inactive {
		return Cart{}, fmt.Errorf("%s: %w", productID, ErrProductInactive)
	}
	if !owner.IsGuest() {
		expiresAt = time.Time{}
	}
	return retrySettled(ctx, s, owner, func() (Cart, error) {
		now := s.Now().UTC()
		return s.Carts.PutItem(ctx, owner, Item{ProductID: p.ID, Category: p.Category, Quantity: qty, AddedAt: now}, expiresAt, now)
	})
}

// Remove deletes a line (CRT-4); an owner without a cart sees an empty cart.
func (s *Service) Remove(ctx context.Context, owner Owner, productID string) (Cart, error) {
	c, err := retrySettled(ctx, s, owner, func() (Cart, error) {
		return s.Carts.RemoveItem(ctx, owner, productID, s.Now().UTC())
	})
	if errors.Is(err, ErrNotFound) {
		return Cart{Owner: owner, Status: Active}, nil
	}
	return c, err
}

// Merge is CRT-5 at login: the guest session's cart joins the user's. A user without any cart
// gets an empty result, not an error.
func (s *Service) Merge(ctx context.Context, sessionID, userID string) (MergeResult, error) {
	owner := User(userID)
	res, err := retrySettled(ctx, s, owner, func() (MergeResult, error) {
		return s.Carts.Merge(ctx, sessionID, userID, s.Now().UTC())
	})
	if errors.Is(err, ErrNotFound) {
		return MergeResult{Cart: Cart{Owner: owner, Status: Active}}, nil
	}
	return res, err
}

// BeginCheckout freezes the user's cart for the checkout placing orderID (see
// Repository.BeginCheckout), settling a stale checkout first if one holds it.
func (s *Service) BeginCheckout(ctx context.Context, owner Owner, orderID string) (Cart, error) {
	return retrySettled(ctx, s, owner, func() (Cart, error) {
		now := s.Now().UTC()
		return s.Carts.BeginCheckout(ctx, owner, orderID, now.Add(CheckoutLease), now)
	})
}

// EndCheckout releases a cart whose checkout failed for certain.
func (s *Service) EndCheckout(ctx context.Context, owner Owner, cartID, orderID string) error {
	return s.Carts.EndCheckout(ctx, owner, cartID, orderID, s.Now().UTC())
}
