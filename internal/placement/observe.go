package placement

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/projection"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/tracing"
)

// Store operations are timed here, around the repository interfaces, and not in each backend:
// the op of a call is then "<prefix>.<method in snake case>" by construction, whichever backend
// serves it, so one dashboard compares backends (TestObservedOpNames holds every decorator to
// that rule against its interface's method list).

// Decorate wraps every repository in s in a decorator that reads each failed call's error
// (transient, below) and reports the call to o.Observe (when set), labelled with the backend
// cfg assigns to its family. Open calls it once on the repositories it opened; a test may call
// it on repositories of its own, to see a backend's error exactly as the API does.
func (s *Stores) Decorate(cfg Config, o Options) {
	at := func(fam Family) timer {
		return timer{backend: cfg[fam], observe: o.Observe, tracer: o.Tracer, outcome: o.Outcome,
			unavailable: unavailable[cfg[fam]]}
	}
	s.Orders = observedOrders{s.Orders, at(Orders)}
	s.ProductSource = observedSource{sourceOf(s.Products), at(Orders)}
	s.Products = observedProducts{s.Products, at(Orders)}
	s.Outbox = observeOutbox(s.Outbox, at(Orders))
	s.Users = observedUsers{s.Users, at(Orders)}
	s.Carts = observedCarts{s.Carts, at(Carts)}
	s.Sessions = observedSessions{s.Sessions, at(Sessions)}
	s.Events = observedEvents{s.Events, at(Events)}
	s.History = observedHistory{s.History, at(History)}
	// s.Catalog is still the unwrapped reader (the products repository itself when the catalog
	// lives with the orders), so a product-page or search read is counted once, as catalog.*,
	// on every placement.
	s.Catalog = observedCatalog{s.Catalog, at(Catalog)}
	if s.CatalogSink != nil {
		s.CatalogSink = observedCatalogSink{s.CatalogSink, at(Catalog)}
	}
}

// timer finishes one call. done is deferred with its start evaluated at the defer statement,
// `defer t.done(ctx, op, time.Now(), &err, sp)`, which needs no closure per call; it may replace
// the call's error (the named result) with its reading of it (transient).
type timer struct {
	backend     string
	observe     func(backend, op string, d time.Duration, err error)
	unavailable func(error) error // the backend's reading of its driver's errors
	tracer      trace.Tracer      // nil: tracing off
	outcome     func(error) string
}

// span starts the operation's span when ctx belongs to a sampled request; sp is nil otherwise,
// so tracing off costs one comparison.
func (t timer) span(ctx context.Context, op string) (_ context.Context, sp trace.Span) {
	if t.tracer == nil || !trace.SpanFromContext(ctx).SpanContext().IsSampled() {
		return ctx, nil
	}
	return t.tracer.Start(ctx, op, trace.WithAttributes(tracing.KeyKind.String(tracing.KindStore),
		tracing.KeyBackend.String(t.backend), tracing.KeyOp.String(op)))
}

func (t timer) done(ctx context.Context, op string, start time.Time, err *error, sp trace.Span) {
	if *err != nil {
		*err = t.transient(ctx, op, *err)
	}
	if sp != nil {
		if t.outcome != nil {
			tracing.EndAs(sp, *err, t.outcome(*err))
		} else {
			tracing.End(sp, *err)
		}
	}
	if t.observe != nil {
		t.observe(t.backend, op, time.Since(start), *err)
	}
}

type observedOrders struct {
	next order.Repository
	t    timer
}

func (r observedOrders) Place(ctx context.Context, p order.Placement) (o order.Order, created bool, err error) {
	ctx, sp := r.t.span(ctx, "orders.place")
	defer r.t.done(ctx, "orders.place", time.Now(), &err, sp)
	return r.next.Place(ctx, p)
}

func (r observedOrders) GetOrder(ctx context.Context, id string) (o order.Order, err error) {
	ctx, sp := r.t.span(ctx, "orders.get_order")
	defer r.t.done(ctx, "orders.get_order", time.Now(), &err, sp)
	return r.next.GetOrder(ctx, id)
}

func (r observedOrders) ByIdempotencyKey(ctx context.Context, userID, key string) (o order.Order, err error) {
	ctx, sp := r.t.span(ctx, "orders.by_idempotency_key")
	defer r.t.done(ctx, "orders.by_idempotency_key", time.Now(), &err, sp)
	return r.next.ByIdempotencyKey(ctx, userID, key)
}

func (r observedOrders) Transition(ctx context.Context, id string, to order.Status, at time.Time) (o order.Order, err error) {
	ctx, sp := r.t.span(ctx, "orders.transition")
	defer r.t.done(ctx, "orders.transition", time.Now(), &err, sp)
	return r.next.Transition(ctx, id, to, at)
}

func (r observedOrders) FenceCart(ctx context.Context, cartID string) (orderID string, err error) {
	ctx, sp := r.t.span(ctx, "orders.fence_cart")
	defer r.t.done(ctx, "orders.fence_cart", time.Now(), &err, sp)
	return r.next.FenceCart(ctx, cartID)
}

type observedProducts struct {
	next catalog.Repository
	t    timer
}

func (r observedProducts) CreateProduct(ctx context.Context, p catalog.Product) (err error) {
	ctx, sp := r.t.span(ctx, "products.create_product")
	defer r.t.done(ctx, "products.create_product", time.Now(), &err, sp)
	return r.next.CreateProduct(ctx, p)
}

func (r observedProducts) UpdateProduct(ctx context.Context, id string, update func(*catalog.Product) error) (p catalog.Product, err error) {
	ctx, sp := r.t.span(ctx, "products.update_product")
	defer r.t.done(ctx, "products.update_product", time.Now(), &err, sp)
	return r.next.UpdateProduct(ctx, id, update)
}

func (r observedProducts) CreateProducts(ctx context.Context, ps []catalog.Product) (err error) {
	ctx, sp := r.t.span(ctx, "products.create_products")
	defer r.t.done(ctx, "products.create_products", time.Now(), &err, sp)
	return r.next.CreateProducts(ctx, ps)
}

func (r observedProducts) GetProduct(ctx context.Context, id string) (p catalog.Product, err error) {
	ctx, sp := r.t.span(ctx, "products.get_product")
	defer r.t.done(ctx, "products.get_product", time.Now(), &err, sp)
	return r.next.GetProduct(ctx, id)
}

type observedSource struct {
	next projection.ProductSource
	t    timer
}

func (r observedSource) GetProduct(ctx context.Context, id string) (p catalog.Product, err error) {
	ctx, sp := r.t.span(ctx, "products.current_product")
	defer r.t.done(ctx, "products.current_product", time.Now(), &err, sp)
	return r.next.GetProduct(ctx, id)
}

func (r observedProducts) SearchProducts(ctx context.Context, q catalog.Search) (p paging.Page[catalog.Product], err error) {
	ctx, sp := r.t.span(ctx, "products.search_products")
	defer r.t.done(ctx, "products.search_products", time.Now(), &err, sp)
	return r.next.SearchProducts(ctx, q)
}

func (r observedProducts) AdjustStock(ctx context.Context, ref catalog.Ref, zone string, delta int64) (n int64, err error) {
	ctx, sp := r.t.span(ctx, "products.adjust_stock")
	defer r.t.done(ctx, "products.adjust_stock", time.Now(), &err, sp)
	return r.next.AdjustStock(ctx, ref, zone, delta)
}

// observeOutbox keeps outbox.Parts working through the decorator: a partitioned log stays
// outbox.Partitioned, and each partition is timed as the outbox.
func observeOutbox(l outbox.Log, t timer) outbox.Log {
	if _, ok := l.(outbox.Partitioned); ok {
		if _, ok := l.(outbox.Leaser); ok {
			return observedLeasedOutbox{observedPartitionedOutbox{observedOutbox{l, t}}}
		}
		return observedPartitionedOutbox{observedOutbox{l, t}}
	}
	return observedOutbox{l, t}
}

type observedPartitionedOutbox struct{ observedOutbox }

// observedLeasedOutbox keeps a shared outbox's drain lease (outbox.Leaser) through the decorator.
type observedLeasedOutbox struct{ observedPartitionedOutbox }

func (l observedLeasedOutbox) AcquireLease(ctx context.Context, consumer, holder string, until time.Time) (ok, takenOver bool, err error) {
	ctx, sp := l.t.span(ctx, "outbox.acquire_lease")
	defer l.t.done(ctx, "outbox.acquire_lease", time.Now(), &err, sp)
	return l.next.(outbox.Leaser).AcquireLease(ctx, consumer, holder, until)
}

func (l observedLeasedOutbox) ReleaseLease(ctx context.Context, consumer, holder string) (err error) {
	ctx, sp := l.t.span(ctx, "outbox.release_lease")
	defer l.t.done(ctx, "outbox.release_lease", time.Now(), &err, sp)
	return l.next.(outbox.Leaser).ReleaseLease(ctx, consumer, holder)
}

// LastSeqs and Checkpoints keep outbox.Positions through the decorator, so the projector and
// the tail still read only the partitions that moved. A partitioned log without them is asked
// partition by partition.
func (l observedPartitionedOutbox) LastSeqs(ctx context.Context) (seqs []int64, err error) {
	ctx, sp := l.t.span(ctx, "outbox.last_seqs")
	defer l.t.done(ctx, "outbox.last_seqs", time.Now(), &err, sp)
	if p, ok := l.next.(outbox.Positions); ok {
		return p.LastSeqs(ctx)
	}
	return eachPartition(l.next, func(part outbox.Log) (int64, error) { return part.LastSeq(ctx) })
}

func (l observedPartitionedOutbox) Checkpoints(ctx context.Context, consumer string) (seqs []int64, err error) {
	ctx, sp := l.t.span(ctx, "outbox.checkpoints")
	defer l.t.done(ctx, "outbox.checkpoints", time.Now(), &err, sp)
	if p, ok := l.next.(outbox.Positions); ok {
		return p.Checkpoints(ctx, consumer)
	}
	return eachPartition(l.next, func(part outbox.Log) (int64, error) { return part.Checkpoint(ctx, consumer) })
}

func eachPartition(l outbox.Log, read func(outbox.Log) (int64, error)) ([]int64, error) {
	parts := outbox.Parts(l)
	out := make([]int64, len(parts))
	for i, part := range parts {
		var err error
		if out[i], err = read(part); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (l observedPartitionedOutbox) Partitions() []outbox.Log {
	parts := l.next.(outbox.Partitioned).Partitions()
	for i, p := range parts {
		parts[i] = observeOutbox(p, l.t)
	}
	return parts
}

type observedOutbox struct {
	next outbox.Log
	t    timer
}

func (l observedOutbox) ReadOutbox(ctx context.Context, after int64, limit int) (m []outbox.Message, err error) {
	ctx, sp := l.t.span(ctx, "outbox.read_outbox")
	defer l.t.done(ctx, "outbox.read_outbox", time.Now(), &err, sp)
	return l.next.ReadOutbox(ctx, after, limit)
}

func (l observedOutbox) Checkpoint(ctx context.Context, consumer string) (seq int64, err error) {
	ctx, sp := l.t.span(ctx, "outbox.checkpoint")
	defer l.t.done(ctx, "outbox.checkpoint", time.Now(), &err, sp)
	return l.next.Checkpoint(ctx, consumer)
}

func (l observedOutbox) SaveCheckpoint(ctx context.Context, consumer string, seq int64) (err error) {
	ctx, sp := l.t.span(ctx, "outbox.save_checkpoint")
	defer l.t.done(ctx, "outbox.save_checkpoint", time.Now(), &err, sp)
	return l.next.SaveCheckpoint(ctx, consumer, seq)
}

func (l observedOutbox) LastSeq(ctx context.Context) (seq int64, err error) {
	ctx, sp := l.t.span(ctx, "outbox.last_seq")
	defer l.t.done(ctx, "outbox.last_seq", time.Now(), &err, sp)
	return l.next.LastSeq(ctx)
}

func (l observedOutbox) CountOutbox(ctx context.Context) (n int64, err error) {
	ctx, sp := l.t.span(ctx, "outbox.count_outbox")
	defer l.t.done(ctx, "outbox.count_outbox", time.Now(), &err, sp)
	return l.next.CountOutbox(ctx)
}

func (l observedOutbox) DeleteOutbox(ctx context.Context, through int64) (n int64, err error) {
	ctx, sp := l.t.span(ctx, "outbox.delete_outbox")
	defer l.t.done(ctx, "outbox.delete_outbox", time.Now(), &err, sp)
	return l.next.DeleteOutbox(ctx, through)
}

type observedUsers struct {
	next account.Repository
	t    timer
}

func (r observedUsers) CreateUser(ctx context.Context, u account.User) (err error) {
	ctx, sp := r.t.span(ctx, "users.create_user")
	defer r.t.done(ctx, "users.create_user", time.Now(), &err, sp)
	return r.next.CreateUser(ctx, u)
}

func (r observedUsers) UserByEmail(ctx context.Context, email string) (u account.User, err error) {
	ctx, sp := r.t.span(ctx, "users.user_by_email")
	defer r.t.done(ctx, "users.user_by_email", time.Now(), &err, sp)
	return r.next.UserByEmail(ctx, email)
}

type observedCarts struct {
	next cart.Repository
	t    timer
}

func (r observedCarts) ActiveCart(ctx context.Context, owner cart.Owner, now time.Time) (c cart.Cart, err error) {
	ctx, sp := r.t.span(ctx, "carts.active_cart")
	defer r.t.done(ctx, "carts.active_cart", time.Now(), &err, sp)
	return r.next.ActiveCart(ctx, owner, now)
}

func (r observedCarts) PutItem(ctx context.Context, owner cart.Owner, item cart.Item, expiresAt, now time.Time) (c cart.Cart, err error) {
	ctx, sp := r.t.span(ctx, "carts.put_item")
	defer r.t.done(ctx, "carts.put_item", time.Now(), &err, sp)
	return r.next.PutItem(ctx, owner, item, expiresAt, now)
}

func (r observedCarts) RemoveItem(ctx context.Context, owner cart.Owner, productID string, now time.Time) (c cart.Cart, err error) {
	ctx, sp := r.t.span(ctx, "carts.remove_item")
	defer r.t.done(ctx, "carts.remove_item", time.Now(), &err, sp)
	return r.next.RemoveItem(ctx, owner, productID, now)
}

func (r observedCarts) Merge(ctx context.Context, sessionID, userID string, now time.Time) (m cart.MergeResult, err error) {
	ctx, sp := r.t.span(ctx, "carts.merge")
	defer r.t.done(ctx, "carts.merge", time.Now(), &err, sp)
	return r.next.Merge(ctx, sessionID, userID, now)
}

func (r observedCarts) BeginCheckout(ctx context.Context, owner cart.Owner, orderID string, until, now time.Time) (c cart.Cart, err error) {
	ctx, sp := r.t.span(ctx, "carts.begin_checkout")
	defer r.t.done(ctx, "carts.begin_checkout", time.Now(), &err, sp)
	return r.next.BeginCheckout(ctx, owner, orderID, until, now)
}

func (r observedCarts) EndCheckout(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) (err error) {
	ctx, sp := r.t.span(ctx, "carts.end_checkout")
	defer r.t.done(ctx, "carts.end_checkout", time.Now(), &err, sp)
	return r.next.EndCheckout(ctx, owner, cartID, orderID, now)
}

func (r observedCarts) Reopen(ctx context.Context, owner cart.Owner, cartID string, now time.Time) (c cart.Cart, err error) {
	ctx, sp := r.t.span(ctx, "carts.reopen")
	defer r.t.done(ctx, "carts.reopen", time.Now(), &err, sp)
	return r.next.Reopen(ctx, owner, cartID, now)
}

func (r observedCarts) MarkOrdered(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) (err error) {
	ctx, sp := r.t.span(ctx, "carts.mark_ordered")
	defer r.t.done(ctx, "carts.mark_ordered", time.Now(), &err, sp)
	return r.next.MarkOrdered(ctx, owner, cartID, orderID, now)
}

func (r observedCarts) PurgeExpired(ctx context.Context, now time.Time) (n int, err error) {
	ctx, sp := r.t.span(ctx, "carts.purge_expired")
	defer r.t.done(ctx, "carts.purge_expired", time.Now(), &err, sp)
	return r.next.PurgeExpired(ctx, now)
}

type observedSessions struct {
	next session.Repository
	t    timer
}

func (r observedSessions) CreateSession(ctx context.Context, s session.Session) (err error) {
	ctx, sp := r.t.span(ctx, "sessions.create_session")
	defer r.t.done(ctx, "sessions.create_session", time.Now(), &err, sp)
	return r.next.CreateSession(ctx, s)
}

func (r observedSessions) GetSession(ctx context.Context, id string, now time.Time) (s session.Session, err error) {
	ctx, sp := r.t.span(ctx, "sessions.get_session")
	defer r.t.done(ctx, "sessions.get_session", time.Now(), &err, sp)
	return r.next.GetSession(ctx, id, now)
}

func (r observedSessions) BindUser(ctx context.Context, id, userID string, now time.Time) (s session.Session, err error) {
	ctx, sp := r.t.span(ctx, "sessions.bind_user")
	defer r.t.done(ctx, "sessions.bind_user", time.Now(), &err, sp)
	return r.next.BindUser(ctx, id, userID, now)
}

func (r observedSessions) Touch(ctx context.Context, id string, now time.Time) (err error) {
	ctx, sp := r.t.span(ctx, "sessions.touch")
	defer r.t.done(ctx, "sessions.touch", time.Now(), &err, sp)
	return r.next.Touch(ctx, id, now)
}

func (r observedSessions) Revoke(ctx context.Context, id string) (err error) {
	ctx, sp := r.t.span(ctx, "sessions.revoke")
	defer r.t.done(ctx, "sessions.revoke", time.Now(), &err, sp)
	return r.next.Revoke(ctx, id)
}

func (r observedSessions) PurgeExpired(ctx context.Context, now time.Time) (n int, err error) {
	ctx, sp := r.t.span(ctx, "sessions.purge_expired")
	defer r.t.done(ctx, "sessions.purge_expired", time.Now(), &err, sp)
	return r.next.PurgeExpired(ctx, now)
}

type observedEvents struct {
	next event.Repository
	t    timer
}

func (r observedEvents) AppendEvent(ctx context.Context, e event.Event) (err error) {
	ctx, sp := r.t.span(ctx, "events.append_event")
	defer r.t.done(ctx, "events.append_event", time.Now(), &err, sp)
	return r.next.AppendEvent(ctx, e)
}

func (r observedEvents) ListEvents(ctx context.Context, q event.Query) (p paging.Page[event.Event], err error) {
	ctx, sp := r.t.span(ctx, "events.list_events")
	defer r.t.done(ctx, "events.list_events", time.Now(), &err, sp)
	return r.next.ListEvents(ctx, q)
}

func (r observedEvents) PurgeEvents(ctx context.Context, before time.Time) (n int, err error) {
	ctx, sp := r.t.span(ctx, "events.purge_events")
	defer r.t.done(ctx, "events.purge_events", time.Now(), &err, sp)
	return r.next.PurgeEvents(ctx, before)
}

type observedHistory struct {
	next history.Repository
	t    timer
}

func (r observedHistory) UpsertEntry(ctx context.Context, e history.Entry) (err error) {
	ctx, sp := r.t.span(ctx, "history.upsert_entry")
	defer r.t.done(ctx, "history.upsert_entry", time.Now(), &err, sp)
	return r.next.UpsertEntry(ctx, e)
}

func (r observedHistory) ListHistory(ctx context.Context, userID string, page paging.Request) (p paging.Page[history.Entry], err error) {
	ctx, sp := r.t.span(ctx, "history.list_history")
	defer r.t.done(ctx, "history.list_history", time.Now(), &err, sp)
	return r.next.ListHistory(ctx, userID, page)
}

type observedCatalog struct {
	next CatalogReader
	t    timer
}

func (r observedCatalog) GetProduct(ctx context.Context, id string) (p catalog.Product, err error) {
	ctx, sp := r.t.span(ctx, "catalog.get_product")
	defer r.t.done(ctx, "catalog.get_product", time.Now(), &err, sp)
	return r.next.GetProduct(ctx, id)
}

func (r observedCatalog) SearchProducts(ctx context.Context, q catalog.Search) (p paging.Page[catalog.Product], err error) {
	ctx, sp := r.t.span(ctx, "catalog.search_products")
	defer r.t.done(ctx, "catalog.search_products", time.Now(), &err, sp)
	return r.next.SearchProducts(ctx, q)
}

type observedCatalogSink struct {
	next projection.CatalogSink
	t    timer
}

func (r observedCatalogSink) UpsertProduct(ctx context.Context, p catalog.Product) (err error) {
	ctx, sp := r.t.span(ctx, "catalog.upsert_product")
	defer r.t.done(ctx, "catalog.upsert_product", time.Now(), &err, sp)
	return r.next.UpsertProduct(ctx, p)
}
