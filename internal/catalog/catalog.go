// Package catalog owns products: their prices, attributes and stock per zone (PRD-1..4).
package catalog

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

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
// {category: 1, _id: 1}, so every write that has it in hand passes it: without it a write by
// _id alone is a broadcast to every shard.
type Product struct {
	ID          string
	Name        string
	Description string
	Category    string
	Price       money.Amount
	// Inactive hides the product from search and listings (an is_active flag inverted, so
	// that a product stored or sent through the outbox before the flag existed reads as active).
	Inactive   bool
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

// Search is PRD-2: one category's active products, sorted by price then id within an
// optional inclusive price range, or newest first (created_at, then id, descending).
type Search struct {
	Category string
	MinPrice money.Amount
	MaxPrice money.Amount // 0 means no upper bound
	Sort     Sort         // "" is SortPrice
	Page     paging.Request
}

// Sort orders a search.
type Sort string

const (
	SortPrice  Sort = "price"
	SortNewest Sort = "newest" // created_at DESC, as a category page lists them
)

// NewestPosition is the keyset position of a newest-first listing, the same on every backend.
type NewestPosition struct {
	Created int64  `json:"n"` // created_at, Unix nanoseconds
	ID      string `json:"i"`
}

// NewestCursor is the cursor after p in a newest-first listing.
func NewestCursor(p Product) any {
	return NewestPosition{Created: p.CreatedAt.UnixNano(), ID: p.ID}
}

// DecodeNewest reads a newest-first cursor; one from a price search is refused.
func DecodeNewest(cursor string) (NewestPosition, error) {
	var pos NewestPosition
	if err := paging.Decode(cursor, &pos); err != nil {
		return pos, err
	}
	if pos.ID == "" || pos.Created == 0 {
		return pos, validation.Field("cursor", "is not a cursor this server issued")
	}
	return pos, nil
}

// Repository stores products. Implementations must keep stock non-negative atomically.
type Repository interface {
	CreateProduct(ctx context.Context, p Product) error
	// CreateProducts creates many products, each with its outbox event, all or none: a bulk
	// load (demo seeding) in a few round trips instead of one transaction per product. It
	// fails with ErrExists, writing nothing, if any id is taken or repeated.
	CreateProducts(ctx context.Context, ps []Product) error
	// UpdateProduct loads the product, lets update change it and saves it in one atomic step.
	UpdateProduct(ctx context.Context, id string, update func(*Product) error) (Product, error)
	GetProduct(ctx context.Context, id string) (Product, error)
	SearchProducts(ctx context.Context, q Search) (paging.Page[Product], error)
	// AdjustStock adds delta (may be negative) to a zone's stock and returns the new level;
	// it fails with *InsufficientStockError rather than go below zero, and with
	// *StockCapError rather than go above MaxStock.
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

// MaxStock caps one zone's stock so sums never overflow. Creation and admin adjustments never
// pass it (AdjustStock refuses with *StockCapError); a cancelled order's units go back uncapped,
// since refusing them would block the cancel, so a level may exceed it by what orders return.
const MaxStock = 1_000_000_000

// StockCapError refuses an adjustment that would take a zone's stock past MaxStock.
type StockCapError struct {
	ProductID string
	Zone      string
	Delta     int64
	Level     int64 // the zone's stock before the refused adjustment
}

func (e *StockCapError) Error() string {
	return fmt.Sprintf("stock cap for product %s in zone %s: %d + %d would pass %d",
		e.ProductID, e.Zone, e.Level, e.Delta, int64(MaxStock))
}

// Validate checks a product before it is created; field names match the API's JSON.
func (p Product) Validate() error {
	var c validation.Collector
	c.Check(ValidID(p.ID), "id", "must be 1-64 letters, digits, '-' or '_'")
	checkName(&c, p.Name)
	checkDescription(&c, p.Description)
	checkCategory(&c, p.Category)
	checkPrice(&c, p.Price)
	checkAttributes(&c, p.Attributes)
	c.Check(len(p.Stock) <= 100, "stock", "at most 100 zones")
	for z, q := range p.Stock {
		c.Check(ValidSlug(z), "stock."+z, "zone must be a lower-case slug")
		c.Check(q >= 0 && q <= MaxStock, "stock."+z, "must be between 0 and 1000000000")
	}
	return c.Err()
}

// Patch is a partial update; nil fields keep their value. Id and stock are not in it (stock
// changes through AdjustStock), so no patch is ever refused naming a field it cannot hold.
type Patch struct {
	Name        *string
	Description *string
	Category    *string
	Price       *money.Amount
	Attributes  *map[string]string
	Active      *bool
}

// Validate checks the fields present. Each field is valid on its own, so the patch can be
// refused before any product is read, and applying a valid one leaves a valid product.
func (pt Patch) Validate() error {
	var c validation.Collector
	if pt.Name != nil {
		checkName(&c, *pt.Name)
	}
	if pt.Description != nil {
		checkDescription(&c, *pt.Description)
	}
	if pt.Category != nil {
		checkCategory(&c, *pt.Category)
	}
	if pt.Price != nil {
		checkPrice(&c, *pt.Price)
	}
	if pt.Attributes != nil {
		checkAttributes(&c, *pt.Attributes)
	}
	return c.Err()
}

// Apply sets the fields present on p.
func (pt Patch) Apply(p *Product) {
	if pt.Name != nil {
		p.Name = *pt.Name
	}
	if pt.Category != nil {
		p.Category = *pt.Category
	}
	if pt.Price != nil {
		p.Price = *pt.Price
	}
	if pt.Attributes != nil {
		p.Attributes = *pt.Attributes
	}
	if pt.Description != nil {
		p.Description = *pt.Description
	}
	if pt.Active != nil {
		p.Inactive = !*pt.Active
	}
}

// Lengths count characters, as the OpenAPI document's minLength and maxLength do.

func checkName(c *validation.Collector, name string) {
	n := utf8.RuneCountInString(name)
	c.Check(n >= 1 && n <= 200, "name", "must be 1-200 characters")
}

func checkDescription(c *validation.Collector, d string) {
	c.Check(utf8.RuneCountInString(d) <= MaxDescription, "description", "must be at most 4000 characters")
}

// MaxDescription bounds a description (characters).
const MaxDescription = 4000

func checkCategory(c *validation.Collector, category string) {
	c.Check(ValidSlug(category), "category", "must be a lower-case slug of 1-64 characters")
}

func checkPrice(c *validation.Collector, price money.Amount) {
	c.Check(price > 0 && price <= money.Max, "price", "must be greater than 0")
}

func checkAttributes(c *validation.Collector, attrs map[string]string) {
	c.Check(len(attrs) <= 50, "attributes", "at most 50 attributes")
	for k, v := range attrs {
		kn := utf8.RuneCountInString(k)
		c.Check(kn >= 1 && kn <= 64 && utf8.RuneCountInString(v) <= 512, "attributes."+k, "keys 1-64 and values up to 512 characters")
	}
}

// Validate checks a search request.
func (q Search) Validate() (Search, error) {
	var c validation.Collector
	c.Check(ValidSlug(q.Category), "category", "is required and must be a category slug")
	c.Check(q.MaxPrice == 0 || q.MaxPrice >= q.MinPrice, "max_price", "must not be below min_price")
	switch q.Sort {
	case "":
		q.Sort = SortPrice
	case SortPrice:
	case SortNewest:
		// The newest-first tables and indexes are ordered by creation alone: a price range
		// there would be a filtered scan of the whole category.
		c.Check(q.MinPrice == 0, "min_price", "a price range needs sort=price")
		c.Check(q.MaxPrice == 0, "max_price", "a price range needs sort=price")
	default:
		c.Add("sort", `must be "price" or "newest"`)
	}
	page, err := q.Page.Normalize()
	if err != nil {
		return q, err
	}
	q.Page = page
	return q, c.Err()
}
