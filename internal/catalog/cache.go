package catalog

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/validation"
)

// Reader is the read side of the catalog: product pages and search, served by the store of
// record or by a read model (Cassandra's products tables), and by CardCache over either.
type Reader interface {
	//dualwrite:read
	GetProduct(ctx context.Context, id string) (Product, error)
	//dualwrite:read
	SearchProducts(ctx context.Context, q Search) (paging.Page[Product], error)
}

// DefaultCacheCards bounds a CardCache: 50,000 cards of ~1 KiB are ~50 MiB.
const DefaultCacheCards = 50_000

// CardCache serves category search from an in-process copy of each searched category's
// product cards, sorted by (price, id), over any Reader. It is told of changes by the outbox
// projector (Invalidate, from product.changed and from orders taking or returning stock); the
// next search of a category refetches the changed products through the Reader first, so a
// change is visible to every search that starts after the projector applied it.
//
// Memory is bounded by MaxCards: a category costs its products plus one, least recently
// searched categories are dropped first, and a category larger than the bound is not cached
// (its searches go to the Reader). Returned products share their maps with the cache: read-only.
type CardCache struct {
	next Reader
	max  int

	mu   sync.Mutex
	cats map[string]*cardSet
	lru  *list.List        // of *cardSet, most recently searched first
	byID map[string]string // product id -> the cached category holding it
	held int               // sum of cost() over cats
}

// cardSet is one category. Its cards slice is never modified once published, so a search
// reads it without holding any lock; refresh builds a new one.
type cardSet struct {
	category string
	elem     *list.Element
	fill     sync.Mutex // one load or refresh at a time keeps refetches in order

	// Guarded by CardCache.mu:
	loaded  bool
	tooBig  bool // larger than the whole cache: searches pass through
	cards   []Product
	at      map[string]int      // product id -> its index in cards
	pending map[string]struct{} // ids changed since cards was built
}

func (s *cardSet) cost() int { return len(s.cards) + 1 }

// NewCardCache caches next's search; maxCards <= 0 means DefaultCacheCards.
func NewCardCache(next Reader, maxCards int) *CardCache {
	if maxCards <= 0 {
		maxCards = DefaultCacheCards
	}
	return &CardCache{next: next, max: maxCards, cats: map[string]*cardSet{}, lru: list.New(), byID: map[string]string{}}
}

// GetProduct is the Reader's: a product page is one keyed read, already cheap.
func (c *CardCache) GetProduct(ctx context.Context, id string) (Product, error) {
	return c.next.GetProduct(ctx, id)
}

// Card returns a product's card as search serves it now, without reading the Reader: ok is
// false unless the product is in a loaded category with no change to it pending (an inactive
// or uncached product, or one changed since, is the Reader's to answer). A card is as fresh as
// search, within the cache's staleness bound.
func (c *CardCache) Card(id string) (Product, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.cats[c.byID[id]]
	if !ok || !s.loaded {
		return Product{}, false
	}
	if _, changed := s.pending[id]; changed {
		return Product{}, false
	}
	i, ok := s.at[id]
	if !ok {
		return Product{}, false
	}
	return s.cards[i], true
}

// Invalidate marks products as changed: the category caching each (wherever the cache last
// saw it) and the category the change names refetch them before serving another search.
func (c *CardCache) Invalidate(refs ...Ref) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range refs {
		if held, ok := c.byID[r.ID]; ok && held != r.Category {
			c.markLocked(held, r.ID)
		}
		c.markLocked(r.Category, r.ID)
	}
}

func (c *CardCache) markLocked(category, id string) {
	s, ok := c.cats[category]
	if !ok {
		return // not cached: its next search loads it fresh
	}
	if s.tooBig {
		c.dropLocked(s) // it may fit now; the next search tries again
		return
	}
	if s.pending == nil {
		s.pending = map[string]struct{}{}
	}
	s.pending[id] = struct{}{}
}

// SearchProducts serves a price-ordered q from the category's cards, loading or refreshing
// them first when needed; newest-first listings, a category too large for the cache, or a
// Reader failing to refresh it are searched through the Reader. Cursors are the backends' own ({p, i}), so pages may alternate freely.
func (c *CardCache) SearchProducts(ctx context.Context, q Search) (paging.Page[Product], error) {
	q, err := q.Validate()
	if err != nil {
		return paging.Page[Product]{}, err
	}
	if q.Sort == SortNewest {
		return c.next.SearchProducts(ctx, q) // cards are kept in price order only
	}
	var after priceCursor
	if q.Page.Cursor != "" {
		if err := paging.Decode(q.Page.Cursor, &after); err != nil {
			return paging.Page[Product]{}, err
		}
		if after.ID == "" {
			return paging.Page[Product]{}, errForeignCursor
		}
	}
	cards, ok, err := c.cards(ctx, q.Category)
	if err != nil || !ok {
		return c.next.SearchProducts(ctx, q)
	}
	return page(cards, q, after), nil
}

var errForeignCursor = validation.Field("cursor", "is not a cursor this server issued")

// priceCursor is the position after the last product shown, as every backend encodes it.
type priceCursor struct {
	Price int64  `json:"p"`
	ID    string `json:"i"`
}

func page(cards []Product, q Search, after priceCursor) paging.Page[Product] {
	// First card at or above the range's minimum, or after the cursor when it is further on.
	start, _ := slices.BinarySearchFunc(cards, q.MinPrice, func(p Product, min money.Amount) int { return cmp.Compare(p.Price, min) })
	if q.Page.Cursor != "" && after.Price >= int64(q.MinPrice) {
		start, _ = slices.BinarySearchFunc(cards, after, func(p Product, a priceCursor) int {
			if int64(p.Price) != a.Price {
				return cmp.Compare(int64(p.Price), a.Price)
			}
			if p.ID <= a.ID {
				return -1 // the cursor's own card and before are skipped
			}
			return 1
		})
	}
	limit := q.Page.Limit + 1
	items := make([]Product, 0, min(limit, len(cards)-start))
	for _, p := range cards[start:] {
		if len(items) == limit || (q.MaxPrice > 0 && p.Price > q.MaxPrice) {
			break
		}
		items = append(items, p)
	}
	return paging.Build(items, q.Page.Limit, func(last Product) any { return priceCursor{Price: int64(last.Price), ID: last.ID} })
}

// cards returns the category's current cards, loading them or refetching the changed ones
// first; ok is false when the category is not cached (too large).
func (c *CardCache) cards(ctx context.Context, category string) ([]Product, bool, error) {
	c.mu.Lock()
	s, ok := c.cats[category]
	if !ok {
		s = &cardSet{category: category}
		s.elem = c.lru.PushFront(s)
		c.cats[category] = s
		c.held += s.cost()
		c.trimLocked(s)
	} else {
		c.lru.MoveToFront(s.elem)
	}
	if s.loaded && len(s.pending) == 0 {
		cards := s.cards
		c.mu.Unlock()
		return cards, true, nil
	}
	tooBig := s.tooBig
	c.mu.Unlock()
	if tooBig {
		return nil, false, nil
	}

	s.fill.Lock()
	defer s.fill.Unlock()
	c.mu.Lock()
	loaded, pending, cards := s.loaded, s.pending, s.cards
	s.pending = nil
	c.mu.Unlock()
	if loaded && len(pending) == 0 {
		return cards, true, nil // another search filled it while this one waited
	}
	var err error
	if !loaded {
		cards, err = c.load(ctx, category)
		if errors.Is(err, errTooBig) {
			c.mu.Lock()
			s.tooBig = true
			c.mu.Unlock()
			return nil, false, nil
		}
	} else {
		cards, err = c.refetch(ctx, category, cards, pending)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		for id := range pending { // keep them for the next try
			if s.pending == nil {
				s.pending = map[string]struct{}{}
			}
			s.pending[id] = struct{}{}
		}
		return nil, false, err
	}
	// Changes invalidated during this fill stay pending for the next search: this one started
	// before the projector applied them, so it may be served without them.
	c.publishLocked(s, cards)
	return cards, true, nil
}

var errTooBig = errors.New("category larger than the card cache")

// load reads the whole category through the Reader, page by page.
func (c *CardCache) load(ctx context.Context, category string) ([]Product, error) {
	var cards []Product
	q := Search{Category: category, Page: paging.Request{Limit: paging.MaxLimit}}
	for {
		pg, err := c.next.SearchProducts(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("card cache: load category %s: %w", category, err)
		}
		cards = append(cards, pg.Items...)
		if len(cards)+1 > c.max {
			return nil, errTooBig
		}
		if pg.Next == "" {
			return cards, nil
		}
		q.Page.Cursor = pg.Next
	}
}

// refetch reads the changed products through the Reader and returns a new sorted slice: a
// product gone or moved to another category leaves this one (and the other is told).
func (c *CardCache) refetch(ctx context.Context, category string, cards []Product, pending map[string]struct{}) ([]Product, error) {
	fresh := make(map[string]Product, len(pending))
	var moved []Ref
	for id := range pending {
		p, err := c.next.GetProduct(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound), err == nil && p.Inactive: // not searchable
		case err != nil:
			return nil, fmt.Errorf("card cache: refetch %s: %w", id, err)
		case p.Category != category:
			moved = append(moved, p.Ref())
		default:
			fresh[id] = p
		}
	}
	out := make([]Product, 0, len(cards)+len(fresh))
	for _, p := range cards {
		if _, changed := pending[p.ID]; !changed {
			out = append(out, p)
		}
	}
	for _, p := range fresh {
		out = append(out, p)
	}
	slices.SortFunc(out, compareCards)
	if len(moved) > 0 {
		c.Invalidate(moved...)
	}
	return out, nil
}

func compareCards(a, b Product) int {
	if a.Price != b.Price {
		return cmp.Compare(a.Price, b.Price)
	}
	return strings.Compare(a.ID, b.ID)
}

// publishLocked installs a category's new cards and keeps the bound, dropping the least
// recently searched categories first. A set evicted while it was being filled stays out.
func (c *CardCache) publishLocked(s *cardSet, cards []Product) {
	if !c.forgetLocked(s) {
		return
	}
	s.cards, s.loaded = cards, true
	s.at = make(map[string]int, len(cards))
	c.held += s.cost()
	for i, p := range cards {
		c.byID[p.ID] = s.category
		s.at[p.ID] = i
	}
	c.trimLocked(s)
}

// trimLocked drops the least recently searched categories, never keep, until the bound holds.
func (c *CardCache) trimLocked(keep *cardSet) {
	for c.held > c.max {
		oldest := c.lru.Back().Value.(*cardSet)
		if oldest == keep {
			break
		}
		c.dropLocked(oldest)
	}
}

func (c *CardCache) dropLocked(s *cardSet) {
	if c.forgetLocked(s) {
		c.lru.Remove(s.elem)
		delete(c.cats, s.category)
	}
}

// forgetLocked takes s's cards out of the index and the count; false if s is no longer cached.
func (c *CardCache) forgetLocked(s *cardSet) bool {
	if c.cats[s.category] != s {
		return false
	}
	for _, p := range s.cards {
		if c.byID[p.ID] == s.category {
			delete(c.byID, p.ID)
		}
	}
	c.held -= s.cost()
	return true
}

// Reset drops every cached category, for when the cache may have missed changes (its outbox
// tail found rows pruned before it read them): the next search of each loads it afresh. A
// load running meanwhile is not published (publishLocked finds its set gone).
func (c *CardCache) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.lru.Len() > 0 {
		c.dropLocked(c.lru.Back().Value.(*cardSet))
	}
}

// CacheStats is what the cache holds now (tests, metrics).
type CacheStats struct {
	Categories int
	Cards      int
}

// Stats reports the cache's current size.
func (c *CardCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Categories: len(c.cats), Cards: c.held - len(c.cats)}
}
