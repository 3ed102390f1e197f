package httpapi

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/tracing"
)

// traceServices wraps each service in a span per call ("carts.Put"), in sampled requests only.
// New calls it only when tracing is on: off, the handlers call the services directly.
func traceServices(s Services, tr trace.Tracer) Services {
	t := svcTracer{tr}
	if s.Accounts != nil {
		s.Accounts = tracedAccounts{s.Accounts, t}
	}
	if s.Sessions != nil {
		s.Sessions = tracedSessions{s.Sessions, t}
	}
	if s.Carts != nil {
		s.Carts = tracedCarts{s.Carts, t}
	}
	if s.Orders != nil {
		s.Orders = tracedOrders{s.Orders, t}
	}
	if s.History != nil {
		s.History = tracedHistory{s.History, t}
	}
	if s.Catalog != nil {
		s.Catalog = tracedCatalog{s.Catalog, t}
	}
	if s.Products != nil {
		s.Products = tracedProducts{s.Products, t}
	}
	if s.Events != nil {
		s.Events = tracedEvents{s.Events, t}
	}
	return s
}

type svcTracer struct{ tr trace.Tracer }

// call runs f in a service span named name when ctx is a sampled request's.
func call[T any](ctx context.Context, t svcTracer, name string, f func(context.Context) (T, error)) (v T, err error) {
	if !trace.SpanFromContext(ctx).SpanContext().IsSampled() {
		return f(ctx)
	}
	ctx, sp := t.tr.Start(ctx, name, trace.WithAttributes(tracing.KeyKind.String(tracing.KindService)))
	// Deferred: a panicking call must end its span too, or the request's trace never completes.
	returned := false
	defer func() {
		if !returned {
			tracing.End(sp, errPanicked)
			return
		}
		tracing.End(sp, err)
	}()
	v, err = f(ctx)
	returned = true
	return v, err
}

// errPanicked is the outcome of a service call that panicked (the request answers 500).
var errPanicked = errors.New("panicked")

// call0 is call for a method that returns only an error.
func call0(ctx context.Context, t svcTracer, name string, f func(context.Context) error) error {
	_, err := call(ctx, t, name, func(ctx context.Context) (struct{}, error) { return struct{}{}, f(ctx) })
	return err
}

type tracedAccounts struct {
	next Accounts
	t    svcTracer
}

func (s tracedAccounts) Register(ctx context.Context, email, password string) (account.User, error) {
	return call(ctx, s.t, "accounts.Register", func(ctx context.Context) (account.User, error) { return s.next.Register(ctx, email, password) })
}

func (s tracedAccounts) Login(ctx context.Context, in account.Login) (account.LoginResult, error) {
	return call(ctx, s.t, "accounts.Login", func(ctx context.Context) (account.LoginResult, error) { return s.next.Login(ctx, in) })
}

func (s tracedAccounts) Logout(ctx context.Context, sessionID string) error {
	return call0(ctx, s.t, "accounts.Logout", func(ctx context.Context) error { return s.next.Logout(ctx, sessionID) })
}

func (s tracedAccounts) RegisterMany(ctx context.Context, in account.BulkRegistration) ([]account.Registered, error) {
	return call(ctx, s.t, "accounts.RegisterMany", func(ctx context.Context) ([]account.Registered, error) {
		return s.next.RegisterMany(ctx, in)
	})
}

type tracedSessions struct {
	next Sessions
	t    svcTracer
}

func (s tracedSessions) Start(ctx context.Context, ip, userAgent string) (token string, ses session.Session, err error) {
	err = call0(ctx, s.t, "sessions.Start", func(ctx context.Context) error {
		token, ses, err = s.next.Start(ctx, ip, userAgent)
		return err
	})
	return token, ses, err
}

func (s tracedSessions) Authenticate(ctx context.Context, token string) (session.Session, error) {
	return call(ctx, s.t, "sessions.Authenticate", func(ctx context.Context) (session.Session, error) { return s.next.Authenticate(ctx, token) })
}

type tracedCarts struct {
	next Carts
	t    svcTracer
}

func (s tracedCarts) Get(ctx context.Context, owner cart.Owner) (cart.Cart, error) {
	return call(ctx, s.t, "carts.Get", func(ctx context.Context) (cart.Cart, error) { return s.next.Get(ctx, owner) })
}

func (s tracedCarts) Put(ctx context.Context, owner cart.Owner, expiresAt time.Time, productID string, qty int64) (cart.Cart, error) {
	return call(ctx, s.t, "carts.Put", func(ctx context.Context) (cart.Cart, error) {
		return s.next.Put(ctx, owner, expiresAt, productID, qty)
	})
}

func (s tracedCarts) Remove(ctx context.Context, owner cart.Owner, productID string) (cart.Cart, error) {
	return call(ctx, s.t, "carts.Remove", func(ctx context.Context) (cart.Cart, error) { return s.next.Remove(ctx, owner, productID) })
}

type tracedOrders struct {
	next Orders
	t    svcTracer
}

func (s tracedOrders) PlaceFromCart(ctx context.Context, userID, zone, key string) (o order.Order, created bool, err error) {
	err = call0(ctx, s.t, "orders.PlaceFromCart", func(ctx context.Context) error {
		o, created, err = s.next.PlaceFromCart(ctx, userID, zone, key)
		return err
	})
	return o, created, err
}

func (s tracedOrders) Transition(ctx context.Context, id string, to order.Status) (order.Order, error) {
	return call(ctx, s.t, "orders.Transition", func(ctx context.Context) (order.Order, error) { return s.next.Transition(ctx, id, to) })
}

func (s tracedOrders) Get(ctx context.Context, id string) (order.Order, error) {
	return call(ctx, s.t, "orders.Get", func(ctx context.Context) (order.Order, error) { return s.next.Get(ctx, id) })
}

type tracedHistory struct {
	next History
	t    svcTracer
}

func (s tracedHistory) ListHistory(ctx context.Context, userID string, req paging.Request) (paging.Page[history.Entry], error) {
	return call(ctx, s.t, "history.ListHistory", func(ctx context.Context) (paging.Page[history.Entry], error) {
		return s.next.ListHistory(ctx, userID, req)
	})
}

type tracedCatalog struct {
	next CatalogReader
	t    svcTracer
}

func (s tracedCatalog) GetProduct(ctx context.Context, id string) (catalog.Product, error) {
	return call(ctx, s.t, "catalog.GetProduct", func(ctx context.Context) (catalog.Product, error) { return s.next.GetProduct(ctx, id) })
}

func (s tracedCatalog) SearchProducts(ctx context.Context, q catalog.Search) (paging.Page[catalog.Product], error) {
	return call(ctx, s.t, "catalog.SearchProducts", func(ctx context.Context) (paging.Page[catalog.Product], error) {
		return s.next.SearchProducts(ctx, q)
	})
}

type tracedProducts struct {
	next Products
	t    svcTracer
}

func (s tracedProducts) GetProduct(ctx context.Context, id string) (catalog.Product, error) {
	return call(ctx, s.t, "products.GetProduct", func(ctx context.Context) (catalog.Product, error) { return s.next.GetProduct(ctx, id) })
}

func (s tracedProducts) CreateProduct(ctx context.Context, p catalog.Product) error {
	return call0(ctx, s.t, "products.CreateProduct", func(ctx context.Context) error { return s.next.CreateProduct(ctx, p) })
}

func (s tracedProducts) UpdateProduct(ctx context.Context, id string, fn func(*catalog.Product) error) (catalog.Product, error) {
	return call(ctx, s.t, "products.UpdateProduct", func(ctx context.Context) (catalog.Product, error) {
		return s.next.UpdateProduct(ctx, id, fn)
	})
}

func (s tracedProducts) AdjustStock(ctx context.Context, ref catalog.Ref, zone string, delta int64) (int64, error) {
	return call(ctx, s.t, "products.AdjustStock", func(ctx context.Context) (int64, error) { return s.next.AdjustStock(ctx, ref, zone, delta) })
}

type tracedEvents struct {
	next Events
	t    svcTracer
}

func (s tracedEvents) AppendEvent(ctx context.Context, e event.Event) error {
	return call0(ctx, s.t, "events.AppendEvent", func(ctx context.Context) error { return s.next.AppendEvent(ctx, e) })
}

func (s tracedEvents) ListEvents(ctx context.Context, q event.Query) (paging.Page[event.Event], error) {
	return call(ctx, s.t, "events.ListEvents", func(ctx context.Context) (paging.Page[event.Event], error) { return s.next.ListEvents(ctx, q) })
}
