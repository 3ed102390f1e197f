// Package catalog owns products: their prices, attributes and stock per zone (PRD-1..4).
package catalog

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/validation"
)

var (
	ErrNotFound = errors.New("product not found")
	ErrExists   = errors.New("product already exists")
)

// InsufficientStockError names the product that cannot cover a request (ORD-1's 409).
type InsufficientStockError struct {
	ProductID string
	Zone      string
	Requested int64
	Available int64
}

func (e *InsufficientStockError) Error() string {
	return fmt.Sprintf("insufficient stock for product %s in zone %s: requested %d, available %d",
		e.ProductID, e.Zone, e.Requested, e.Available)
}

// Product is the catalog aggregate. Category is part of the MongoDB shard key
// {category: 1, _id: 1}, so every write that has it in hand passes it (DESIGN.md note 7).
type Product struct {
	ID         string
	Name       string
	Category   string
	Price      money.Amount
	Attributes map[string]string
	Stock      map[string]int64 // zone -> units on hand
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// Ref addresses a product by its full shard key.
type Ref struct {
	ID       string
	Category string
}

// Ref returns the product's full address.
func (p Product) Ref() Ref { return Ref{ID: p.ID, Category: p.Category} }

// Search is PRD-2: one category, an optional inclusive price range, sorted by price then id.
type Search struct {
	Category string
	MinPrice money.Amount
	MaxPrice money.Amount // 0 means no upper bound
	Page     paging.Request
}

// Repository stores products. Implementations must keep stock non-negative atomically.
type Repository interface {
	CreateProduct(ctx context.Context, p Product) error
	// UpdateProduct loads the product, lets update change it and saves it in one atomic step.
	UpdateProduct(ctx context.Context, id string, update func(*Product) error) (Product, error)
	GetProduct(ctx context.Context, id string) (Product, error)
	SearchProducts(ctx context.Context, q Search) (paging.Page[Product], error)
	// AdjustStock adds delta (may be negative) to a zone's stock and returns the new level;
	// it fails with *InsufficientStockError rather than go below zero.
	AdjustStock(ctx context.Context, ref Ref, zone string, delta int64) (int64, error)
}

var (
	idPattern   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	slugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
)

// ValidID reports whether s can be a product, order, cart or user identifier.
func ValidID(s string) bool { return idPattern.MatchString(s) }

// ValidSlug reports whether s is a category or zone name.
func ValidSlug(s string) bool { return slugPattern.MatchString(s) }

// MaxStock bounds one zone's stock so sums never overflow.
const MaxStock = 1_000_000_000

// Validate checks a product before it is stored; field names match the API's JSON.
func (p Product) Validate() error {
	var c validation.Collector
	c.Check(ValidID(p.ID), "id", "must be 1-64 letters, digits, '-' or '_'")
	c.Check(p.Name != "" && len(p.Name) <= 200, "name", "must be 1-200 characters")
	c.Check(ValidSlug(p.Category), "category", "must be a lower-case slug of 1-64 characters")
	c.Check(p.Price > 0 && p.Price <= money.Max, "price", "must be greater than 0")
	c.Check(len(p.Attributes) <= 50, "attributes", "at most 50 attributes")
	for k, v := range p.Attributes {
		c.Check(k != "" && len(k) <= 64 && len(v) <= 512, "attributes."+k, "keys 1-64 and values up to 512 characters")
	}
	c.Check(len(p.Stock) <= 100, "stock", "at most 100 zones")
	for z, q := range p.Stock {
		c.Check(ValidSlug(z), "stock."+z, "zone must be a lower-case slug")
		c.Check(q >= 0 && q <= MaxStock, "stock."+z, "must be between 0 and 1000000000")
	}
	return c.Err()
}

// Validate checks a search request.
func (q Search) Validate() (Search, error) {
	var c validation.Collector
	c.Check(ValidSlug(q.Category), "category", "is required and must be a category slug")
	c.Check(q.MaxPrice == 0 || q.MaxPrice >= q.MinPrice, "max_price", "must not be below min_price")
	page, err := q.Page.Normalize()
	if err != nil {
		return q, err
	}
	q.Page = page
	return q, c.Err()
}
