// Package projection applies the outbox's cross-store follow-ups: an ordered cart is marked
// ordered (CRT-6) and the order-history read model is updated (ORD-2, HIS-1), wherever those
// families live. Every handler is idempotent, so a replay after a crash changes nothing.
package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
)

// Consumer is the checkpoint name of the main projector.
const Consumer = "projector"

// CartMarker is the cart side of an order.
type CartMarker interface {
	MarkOrdered(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error
}

// CatalogSink receives product changes for a catalog read model kept in another store (CAT-1).
type CatalogSink interface {
	UpsertProduct(ctx context.Context, p catalog.Product) error
}

// CardInvalidator is told which products a change touched (catalog.CardCache).
type CardInvalidator interface {
	Invalidate(refs ...catalog.Ref)
}

// Targets are the stores follow-ups go to; Catalog may be nil when the catalog is read from
// the transactional store itself, Cards when no card cache serves search. Products is the
// store of record the read model refetches from when orders change stock.
type Targets struct {
	Carts    CartMarker
	History  history.Repository
	Catalog  CatalogSink
	Products ProductSource
	Cards    CardInvalidator
}

// ProductSource reads a product from the store of record.
type ProductSource interface {
	GetProduct(ctx context.Context, id string) (catalog.Product, error)
}

// Register installs the handlers on p. The cart and the history are what the buyer reads back:
// entry handlers, applied once per order event by the order's own request (Inline) or, if it
// did not finish, by the background drain. The catalog read model and the cards are refresh
// handlers: applied by the request too (another process's product page shows the stock taken
// once the order answered), and again by the drain, which serialises them across processes.
func Register(p *outbox.Projector, t Targets) {
	p.Handle(outbox.TopicOrderPlaced, func(ctx context.Context, m outbox.Message) error {
		o, err := decodeOrder(m)
		if err != nil {
			return err
		}
		// The cart and the history are different aggregates and both writes are idempotent:
		// run together, the order's read-your-writes Sync waits for one round trip, not two.
		// Either failing fails the message, which is applied again.
		var wg sync.WaitGroup
		var markErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := t.Carts.MarkOrdered(ctx, cart.User(o.UserID), o.CartID, o.ID, o.CreatedAt); err != nil {
				markErr = fmt.Errorf("mark cart %s ordered: %w", o.CartID, err)
			}
		}()
		histErr := t.History.UpsertEntry(ctx, history.FromOrder(o))
		wg.Wait()
		return errors.Join(markErr, histErr)
	})
	p.Handle(outbox.TopicOrderStatus, func(ctx context.Context, m outbox.Message) error {
		o, err := decodeOrder(m)
		if err != nil {
			return err
		}
		return t.History.UpsertEntry(ctx, history.FromOrder(o))
	})
	if t.Catalog != nil {
		RegisterCatalog(p.Refreshers(), t.Catalog, t.Products)
	}
	if t.Cards != nil {
		RegisterCards(p.Refreshers(), t.Cards)
	}
}

// Inline applies an order's own follow-ups right after its commit (order.FollowUps): the
// outbox message it committed, applied by the request instead of waiting for a drain of
// everyone's. Sync waits for a drain of everything committed (the demo seed's catch-up).
type Inline struct{ P *outbox.Projector }

// Placed applies the follow-ups of o's placement.
func (a Inline) Placed(ctx context.Context, o order.Order) error {
	return a.apply(ctx, outbox.TopicOrderPlaced, o)
}

// StatusChanged applies the follow-ups of o's status change.
func (a Inline) StatusChanged(ctx context.Context, o order.Order) error {
	return a.apply(ctx, outbox.TopicOrderStatus, o)
}

// Sync waits for a drain of every message committed before the call.
func (a Inline) Sync(ctx context.Context) error { return a.P.Sync(ctx) }

// apply rebuilds the message the order store committed (the same JSON of the same order, under
// the order's id) so the drain knows it for applied.
func (a Inline) apply(ctx context.Context, topic string, o order.Order) error {
	payload, err := json.Marshal(o)
	if err != nil {
		return fmt.Errorf("encode order %s: %w", o.ID, err)
	}
	return a.P.Apply(ctx, outbox.Message{Topic: topic, Key: o.ID, Payload: payload, At: o.UpdatedAt})
}

// RegisterCatalog feeds a catalog read model: product changes as they come, and the products
// of an order (stock taken, or returned by a cancel) read again from the store of record,
// since an order's event carries no stock levels. Register those handlers before the cards'.
//
// With a source, a product change is read again from the store too rather than written from
// its message: an order's stock change does not move UpdatedAt, so the read model cannot tell
// an older message's stock from a newer read's, and a product's change and its orders sit
// under different outbox keys (partitions drained at once, in no fixed order). The creation's
// stock, applied after the order's refetch, would otherwise stay on the product page until
// the product's next change. Refreshes of one product are serialised, so the read written
// last is the one read last; whichever message comes last, it leaves the store's current state.
func RegisterCatalog(p Handlers, sink CatalogSink, source ProductSource) {
	if source == nil {
		p.Handle(outbox.TopicProductChanged, func(ctx context.Context, m outbox.Message) error {
			var pr catalog.Product
			if err := json.Unmarshal(m.Payload, &pr); err != nil {
				return fmt.Errorf("decode product #%d: %w", m.Seq, err)
			}
			return sink.UpsertProduct(ctx, pr)
		})
		return
	}
	r := &refresher{sink: sink, source: source, held: map[string]*productRefresh{}}
	p.Handle(outbox.TopicProductChanged, func(ctx context.Context, m outbox.Message) error {
		var pr catalog.Product
		if err := json.Unmarshal(m.Payload, &pr); err != nil {
			return fmt.Errorf("decode product #%d: %w", m.Seq, err)
		}
		return r.refresh(ctx, pr.ID)
	})
	restock := func(ctx context.Context, m outbox.Message) error {
		o, err := decodeOrder(m)
		if err != nil {
			return err
		}
		if len(o.Items) == 1 {
			return r.refresh(ctx, o.Items[0].ProductID)
		}
		// An order's lines are different products, each refresh serialised per product on
		// its own: they run at once, a round trip for the order rather than one per line.
		errs := make([]error, len(o.Items))
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			panicked any
		)
		sem := make(chan struct{}, refreshParallel)
		for i, it := range o.Items {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() {
					// A refresh's panic is the handler's, as if it ran in the handler's goroutine.
					if v := recover(); v != nil {
						mu.Lock()
						panicked = v
						mu.Unlock()
					}
					<-sem
					wg.Done()
				}()
				errs[i] = r.refresh(ctx, it.ProductID)
			}()
		}
		wg.Wait()
		if panicked != nil {
			panic(panicked)
		}
		return errors.Join(errs...)
	}
	p.Handle(outbox.TopicOrderPlaced, restock)
	p.Handle(outbox.TopicOrderStatus, restock)
}

// refreshParallel caps one order's concurrent refreshes (an order has up to cart.MaxItems lines).
const refreshParallel = 8

// refresher copies products from the store of record to the read model, one refresh of a
// product at a time: two overlapping could write their reads in the other order. Refreshes of
// one product asked for while one runs are coalesced: they share the next one, which reads
// after all of them were asked for, so a burst of orders of one product costs two refreshes,
// not one per order.
type refresher struct {
	sink   CatalogSink
	source ProductSource

	mu   sync.Mutex
	held map[string]*productRefresh // products being refreshed, dropped when none is pending
}

// productRefresh is one product's refreshes: next is the one the callers arriving now share.
type productRefresh struct {
	next *refreshRound // guarded by refresher.mu
}

type refreshRound struct {
	done     chan struct{}
	err      error
	panicked any  // the copy's panic, raised again in every caller sharing the round
	decided  bool // a drain shares it (or a caller that is no request): not a provisional copy
}

// refreshFor bounds a refresh, which runs for every caller sharing it, not under one caller's ctx.
const refreshFor = 10 * time.Second

func (r *refresher) refresh(ctx context.Context, id string) error {
	r.mu.Lock()
	pr := r.held[id]
	start := pr == nil
	if start {
		pr = &productRefresh{}
		r.held[id] = pr
	}
	if pr.next == nil {
		pr.next = &refreshRound{done: make(chan struct{})}
	}
	round := pr.next
	round.decided = round.decided || !outbox.ByRequest(ctx)
	r.mu.Unlock()
	if start {
		go r.run(context.WithoutCancel(ctx), id, pr)
	}
	select {
	case <-round.done:
		if round.panicked != nil {
			panic(round.panicked)
		}
		return round.err
	case <-ctx.Done():
		return fmt.Errorf("refresh product %s: %w", id, ctx.Err())
	}
}

// run refreshes id round after round until no caller waits for another.
func (r *refresher) run(ctx context.Context, id string, pr *productRefresh) {
	for {
		r.mu.Lock()
		round := pr.next
		if round == nil {
			delete(r.held, id)
			r.mu.Unlock()
			return
		}
		pr.next = nil
		decided := round.decided
		r.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, refreshFor)
		if !decided {
			// A request's copy: other processes' requests and drains copy the same product
			// at the same time, in no order; the drain's copy decides (catalog.WithReadAt).
			rctx = catalog.WithReadAt(rctx, time.Now())
		}
		round.panicked, round.err = r.copyRecovering(rctx, id)
		cancel()
		close(round.done)
	}
}

// copyRecovering is copyProduct with its panic returned: it runs in the refresher's goroutine,
// where nobody could recover it, so the callers sharing the round raise it instead.
func (r *refresher) copyRecovering(ctx context.Context, id string) (panicked any, err error) {
	defer func() {
		if v := recover(); v != nil {
			panicked = v
		}
	}()
	return nil, r.copyProduct(ctx, id)
}

func (r *refresher) copyProduct(ctx context.Context, id string) error {
	pr, err := r.source.GetProduct(ctx, id)
	if errors.Is(err, catalog.ErrNotFound) {
		return nil // gone since: nothing to show
	}
	if err != nil {
		return fmt.Errorf("read product %s: %w", id, err)
	}
	return r.sink.UpsertProduct(ctx, pr)
}

// Handlers is what handlers are registered on: the projector, or a process's own outbox tail
// (outbox.Tail), which sees every change whichever process's projector applied it.
type Handlers interface {
	Handle(topic string, h outbox.Handler)
}

// RegisterCards invalidates cached cards; registered after the read model's handlers, so a
// refetch reads the model already updated (a tail does so by staying behind the projector's
// checkpoint). Orders change stock (placed: taken, cancelled: returned), so their products are
// invalidated too; the order's category is where the product was at checkout, and the cache
// also looks where it last saw the product.
func RegisterCards(p Handlers, cards CardInvalidator) {
	p.Handle(outbox.TopicProductChanged, func(_ context.Context, m outbox.Message) error {
		var pr catalog.Product
		if err := json.Unmarshal(m.Payload, &pr); err != nil {
			return fmt.Errorf("decode product #%d: %w", m.Seq, err)
		}
		cards.Invalidate(pr.Ref())
		return nil
	})
	byOrder := func(_ context.Context, m outbox.Message) error {
		o, err := decodeOrder(m)
		if err != nil {
			return err
		}
		refs := make([]catalog.Ref, len(o.Items))
		for i, it := range o.Items {
			refs[i] = catalog.Ref{ID: it.ProductID, Category: it.Category}
		}
		cards.Invalidate(refs...)
		return nil
	}
	p.Handle(outbox.TopicOrderPlaced, byOrder)
	p.Handle(outbox.TopicOrderStatus, byOrder)
}

func decodeOrder(m outbox.Message) (order.Order, error) {
	var o order.Order
	if err := json.Unmarshal(m.Payload, &o); err != nil {
		return o, fmt.Errorf("decode order #%d: %w", m.Seq, err)
	}
	return o, nil
}
