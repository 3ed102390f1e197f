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

// Service runs the cart use cases.
type Service struct {
	Carts    Repository
	Products ProductLookup
	Now      func() time.Time
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
	if !owner.IsGuest() {
		expiresAt = time.Time{}
	}
	now := s.Now().UTC()
	return s.Carts.PutItem(ctx, owner, Item{ProductID: p.ID, Category: p.Category, Quantity: qty, AddedAt: now}, expiresAt, now)
}

// Remove deletes a line (CRT-4); an owner without a cart sees an empty cart.
func (s *Service) Remove(ctx context.Context, owner Owner, productID string) (Cart, error) {
	c, err := s.Carts.RemoveItem(ctx, owner, productID, s.Now().UTC())
	if errors.Is(err, ErrNotFound) {
		return Cart{Owner: owner, Status: Active}, nil
	}
	return c, err
}
