// Package shop is the composition root: it opens the stores a placement names and builds the
// services and the outbox projector on top of them, the same way for serve, seed and benchmarks.
package shop

import (
	"context"
	"log/slog"
	"time"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/projection"
	"github.com/shardmart/shardmart/internal/session"
)

// Config selects the backends and tunes the services.
type Config struct {
	Placement  placement.Config
	Backends   placement.Options
	SessionTTL time.Duration
	Logger     *slog.Logger
	Now        func() time.Time
	// CacheCards bounds the product cards cached for search (catalog.CardCache); 0 is
	// catalog.DefaultCacheCards, negative turns the cache off.
	CacheCards int
}

// Shop is an open platform instance.
type Shop struct {
	Stores    *placement.Stores
	Carts     *cart.Service
	Orders    *order.Service
	Sessions  *session.Service
	Accounts  *account.Service
	Projector *outbox.Projector
}

// API is the services the HTTP API calls.
func (s *Shop) API() httpapi.Services {
	return httpapi.Services{Accounts: s.Accounts, Sessions: s.Sessions, Carts: s.Carts, Orders: s.Orders,
		History: s.Stores.History, Catalog: s.Stores.Catalog, Products: s.Stores.Products, Events: s.Stores.Events}
}

// Open opens the stores and wires the services.
func Open(ctx context.Context, c Config) (*Shop, error) {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = session.DefaultTTL
	}
	if c.Placement == nil {
		c.Placement = placement.Embedded()
	}
	st, err := placement.Open(ctx, c.Placement, c.Backends)
	if err != nil {
		return nil, err
	}
	p := outbox.NewProjector(st.Outbox, projection.Consumer, c.Logger)
	targets := projection.Targets{Carts: st.Carts, History: st.History, Catalog: st.CatalogSink, Products: st.Products}
	if c.CacheCards >= 0 {
		// Search reads cached cards wherever the catalog lives; the projector invalidates them.
		cards := catalog.NewCardCache(st.Catalog, c.CacheCards)
		st.Catalog, targets.Cards = cards, cards
	}
	projection.Register(p, targets)
	// Carts check products against the transactional store, not the (lagging) catalog read
	// model: a product created a moment ago must be addable at once. The order store settles
	// checkouts that outlived their lease.
	carts := &cart.Service{Carts: st.Carts, Products: st.Products, Orders: st.Orders, Now: c.Now}
	sessions := &session.Service{Sessions: st.Sessions, TTL: c.SessionTTL, Now: c.Now}
	return &Shop{
		Stores:    st,
		Carts:     carts,
		Orders:    &order.Service{Orders: st.Orders, Carts: carts, Projector: p, Now: c.Now, Logger: c.Logger},
		Sessions:  sessions,
		Accounts:  &account.Service{Users: st.Users, Sessions: sessions, Carts: carts, Now: c.Now},
		Projector: p,
	}, nil
}

// Empty reports whether nothing was ever written to the transactional store.
func (s *Shop) Empty(ctx context.Context) (bool, error) {
	last, err := s.Stores.Outbox.LastSeq(ctx)
	return last == 0, err
}

// OutboxConsumers are the consumers of the outbox: pruning keeps every row one of them has not
// passed. A new consumer of the outbox must be added here.
func (s *Shop) OutboxConsumers() []string { return []string{projection.Consumer} }

// Close closes the stores.
func (s *Shop) Close() error { return s.Stores.Close() }
