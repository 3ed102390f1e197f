package httpapi

import (
	"context"
	"time"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/session"
)

// The application services the handlers call, declared here, where they are used: a handler
// decodes, calls one of these, and encodes. The serve command fills them from the shop
// (internal/shop); the use cases live in the domain packages' services.

// Accounts registers, logs in (with the cart merge) and logs out (account.Service).
type Accounts interface {
	Register(ctx context.Context, email, password string) (account.User, error)
	Login(ctx context.Context, in account.Login) (account.LoginResult, error)
	Logout(ctx context.Context, sessionID string) error
	RegisterMany(ctx context.Context, in account.BulkRegistration) ([]account.Registered, error)
}

// Sessions starts guest sessions and resolves bearer tokens (session.Service).
type Sessions interface {
	Start(ctx context.Context, ip, userAgent string) (string, session.Session, error)
	Authenticate(ctx context.Context, token string) (session.Session, error)
}

// Carts reads and changes the caller's cart (cart.Service).
type Carts interface {
	Get(ctx context.Context, owner cart.Owner) (cart.Cart, error)
	Put(ctx context.Context, owner cart.Owner, expiresAt time.Time, productID string, qty int64) (cart.Cart, error)
	Remove(ctx context.Context, owner cart.Owner, productID string) (cart.Cart, error)
}

// Orders places orders, changes their status and reads one (order.Service).
type Orders interface {
	PlaceFromCart(ctx context.Context, userID, zone, key string) (order.Order, bool, error)
	Transition(ctx context.Context, id string, to order.Status) (order.Order, error)
	Get(ctx context.Context, id string) (order.Order, error)
}

// History lists a user's orders, newest first (ORD-2).
type History interface {
	ListHistory(ctx context.Context, userID string, req paging.Request) (paging.Page[history.Entry], error)
}

// CatalogReader serves product pages and search (the read model wherever it lives).
type CatalogReader interface {
	GetProduct(ctx context.Context, id string) (catalog.Product, error)
	SearchProducts(ctx context.Context, q catalog.Search) (paging.Page[catalog.Product], error)
}

// Cards are the card cache search serves from: a cart answer prices its lines from it when it
// holds them (Card's ok), and reads the catalog for the others.
type Cards interface {
	Card(id string) (catalog.Product, bool)
}

// Products are the admin's catalog writes, on the transactional store.
type Products interface {
	GetProduct(ctx context.Context, id string) (catalog.Product, error)
	CreateProduct(ctx context.Context, p catalog.Product) error
	UpdateProduct(ctx context.Context, id string, fn func(*catalog.Product) error) (catalog.Product, error)
	AdjustStock(ctx context.Context, ref catalog.Ref, zone string, delta int64) (int64, error)
}

// Events appends and lists click events (EVT-1).
type Events interface {
	AppendEvent(ctx context.Context, e event.Event) error
	ListEvents(ctx context.Context, q event.Query) (paging.Page[event.Event], error)
}

// Services bundles them.
type Services struct {
	Accounts Accounts
	Sessions Sessions
	Carts    Carts
	Orders   Orders
	History  History
	Catalog  CatalogReader
	Cards    Cards // nil: every cart line is read from Catalog
	Products Products
	Events   Events
}
