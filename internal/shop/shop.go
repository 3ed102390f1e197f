// Package shop is the composition root: it opens the stores a placement names and builds the
// services and the outbox projector on top of them, the same way for serve, seed and benchmarks.
package shop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/dualwrite"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
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
	// CacheStaleAfter is how far behind the outbox this process's card cache may fall (once
	// FollowChanges runs) before search bypasses it for the store; 0 is DefaultCacheStaleAfter.
	CacheStaleAfter time.Duration
}

// DefaultCacheStaleAfter bounds how stale a process's card cache may be: past it, search reads
// the store and /readyz says why.
const DefaultCacheStaleAfter = time.Second

// TailEvery is how often a process's outbox tail looks for changes made through any process.
const TailEvery = 100 * time.Millisecond

// Shop is an open platform instance.
type Shop struct {
	Stores    *placement.Stores
	Carts     *cart.Service
	Orders    *order.Service
	Sessions  *session.Service
	Accounts  *account.Service
	Projector *outbox.Projector
	// Tail follows the outbox for this process's card cache (nil without a cache).
	Tail *outbox.Tail
	// Migrations is the dual-write layer following `shardmart migrate` (nil unless
	// Backends.Migrations).
	Migrations *dualwrite.Layer

	cards      *followedCards
	staleAfter time.Duration
}

// API is the services the HTTP API calls.
func (s *Shop) API() httpapi.Services {
	api := httpapi.Services{Accounts: s.Accounts, Sessions: s.Sessions, Carts: s.Carts, Orders: s.Orders,
		History: s.Stores.History, Catalog: s.Stores.Catalog, Products: s.Stores.Products, Events: s.Stores.Events}
	if s.cards != nil {
		api.Cards = s.cards
	}
	return api
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
	var migrations *dualwrite.Layer
	if c.Backends.Migrations {
		c.Backends.Wrap = func(ctx context.Context, s *placement.Stores, cfg placement.Config) (err error) {
			wrap := dualwrite.Wrap
			switch c.Backends.MigrationTarget {
			case "", placement.Cassandra:
			case placement.Mongo:
				wrap = dualwrite.WrapMongo
			default:
				return fmt.Errorf("migrations into %q: want cassandra or mongo", c.Backends.MigrationTarget)
			}
			migrations, err = wrap(ctx, s, cfg, c.Backends)
			return err
		}
	}
	st, err := placement.Open(ctx, c.Placement, c.Backends)
	if err != nil {
		return nil, err
	}
	p := outbox.NewProjector(st.Outbox, projection.Consumer, c.Logger)
	targets := projection.Targets{Carts: st.Carts, History: st.History, Catalog: st.CatalogSink, Products: st.ProductSource}
	if c.CacheStaleAfter <= 0 {
		c.CacheStaleAfter = DefaultCacheStaleAfter
	}
	var tail *outbox.Tail
	var followed *followedCards
	if c.CacheCards >= 0 {
		// Search reads cached cards wherever the catalog lives. The projector invalidates them
		// where it applies a change; the tail, in every process, wherever a change was applied.
		// A read model in another store is updated by the projector: the tail then stays behind
		// the projector's checkpoint, so a refetch reads the model already updated.
		cards := catalog.NewCardCache(st.Catalog, c.CacheCards)
		ceiling := ""
		if targets.Catalog != nil {
			ceiling = projection.Consumer
		}
		tail = outbox.NewTail(st.Outbox, ceiling)
		tail.Reset = cards.Reset
		projection.RegisterCards(tail, cards)
		// The tail takes its positions before the cache can load anything, so every change
		// the cache could miss is after them. Failing, it is not started: search bypasses the
		// cache until a poll succeeds.
		_ = tail.Poll(ctx)
		followed = &followedCards{CardCache: cards, store: st.Catalog, tail: tail, staleAfter: c.CacheStaleAfter}
		st.Catalog, targets.Cards = followed, cards
	}
	projection.Register(p, targets)
	// Carts check products against the transactional store, not the (lagging) catalog read
	// model: a product created a moment ago must be addable at once. The order store settles
	// checkouts that outlived their lease.
	carts := &cart.Service{Carts: st.Carts, Products: st.Products, Orders: st.Orders, Now: c.Now}
	sessions := &session.Service{Sessions: st.Sessions, TTL: c.SessionTTL, Now: c.Now}
	return &Shop{
		Stores:     st,
		Carts:      carts,
		Orders:     &order.Service{Orders: st.Orders, Carts: carts, FollowUps: projection.Inline{P: p}, Now: c.Now, Logger: c.Logger},
		Sessions:   sessions,
		Accounts:   &account.Service{Users: st.Users, Sessions: sessions, Carts: carts, Now: c.Now},
		Projector:  p,
		Tail:       tail,
		Migrations: migrations,
		cards:      followed,
	}, nil
}

// FollowChanges runs the outbox tail until ctx ends: from then on the card cache sees every
// change committed through any process, within TailEvery plus a poll, and search bypasses the
// cache whenever the tail is further behind than Config.CacheStaleAfter. Serve runs it; a
// single process without it relies on its projector's invalidations alone.
func (s *Shop) FollowChanges(ctx context.Context) {
	if s.cards == nil {
		return
	}
	s.cards.following.Store(true)
	defer s.cards.following.Store(false)
	s.Tail.Run(ctx, TailEvery)
}

// CacheFollowing reports why search does not use the card cache now (nil: it does, or no
// cache or no tail runs).
func (s *Shop) CacheFollowing() error {
	if s.cards == nil {
		return nil
	}
	return s.cards.stale()
}

// followedCards serves search from the card cache while the tail keeps up, else from the store.
type followedCards struct {
	*catalog.CardCache
	store      catalog.Reader
	tail       *outbox.Tail
	staleAfter time.Duration
	following  atomic.Bool
}

// ErrCacheBehind is CacheFollowing's error: the card cache may miss changes.
var ErrCacheBehind = errors.New("card cache not following the outbox")

func (f *followedCards) stale() error {
	if !f.following.Load() {
		return nil
	}
	st := f.tail.State()
	switch {
	case !st.Started:
		return fmt.Errorf("%w: not started", ErrCacheBehind)
	case st.Behind > f.staleAfter:
		return fmt.Errorf("%w: behind %s (more than %s)", ErrCacheBehind, st.Behind.Round(time.Millisecond), f.staleAfter)
	}
	return nil
}

// SearchProducts reads the cache while it is fresh enough, the store otherwise.
func (f *followedCards) SearchProducts(ctx context.Context, q catalog.Search) (paging.Page[catalog.Product], error) {
	if f.stale() != nil {
		return f.store.SearchProducts(ctx, q)
	}
	return f.CardCache.SearchProducts(ctx, q)
}

// Card serves a cached card only while search would: not when the tail is too far behind.
func (f *followedCards) Card(id string) (catalog.Product, bool) {
	if f.stale() != nil {
		return catalog.Product{}, false
	}
	return f.CardCache.Card(id)
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
