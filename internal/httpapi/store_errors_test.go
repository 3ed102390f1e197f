package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	sqlite3 "github.com/mattn/go-sqlite3"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// storeErrorClass is one class of a driver's errors, as the driver builds it, and what the
// problem's detail must name (the state and, where the driver gives it, the level). An empty
// level means the error is our own bug: 500.
type storeErrorClass struct {
	name  string
	err   error
	level string
}

// storeErrorClasses lists, per backend, the driver errors a healthy cluster heals by itself,
// and one it does not.
var storeErrorClasses = map[string][]storeErrorClass{
	placement.Cassandra: {
		{"unavailable", &gocql.RequestErrUnavailable{Consistency: gocql.Quorum, Required: 3, Alive: 1}, "QUORUM needs 3 replicas, 1 reachable"},
		{"write timeout", &gocql.RequestErrWriteTimeout{Consistency: gocql.Quorum, Received: 1, BlockFor: 2, WriteType: "SIMPLE"}, "write at QUORUM timed out (1 of 2 replicas acknowledged)"},
		{"CAS write timeout", &gocql.RequestErrWriteTimeout{Consistency: gocql.Serial, Received: 0, BlockFor: 2, WriteType: "CAS"}, "conditional write at SERIAL timed out (0 of 2"},
		{"read timeout", &gocql.RequestErrReadTimeout{Consistency: gocql.LocalQuorum, Received: 0, BlockFor: 2}, "read at LOCAL_QUORUM timed out (0 of 2 replicas answered)"},
		{"CAS write unknown", &gocql.RequestErrCASWriteUnknown{Consistency: gocql.Serial, Received: 1, BlockFor: 2}, "outcome of a conditional write at SERIAL unknown"},
		{"overloaded", &gocql.RequestErrOverloaded{}, "coordinator is overloaded"},
		{"bootstrapping", &gocql.RequestErrBootstrapping{}, "coordinator is still bootstrapping"},
		{"client timeout", gocql.ErrTimeoutNoResponse, "no answer from the coordinator within the client timeout"},
		{"no connections", gocql.ErrNoConnections, "no node reachable"},
		{"connection closed", gocql.ErrConnectionClosed, "connection to the coordinator closed"},
		{"no streams", gocql.ErrNoStreams, "every stream"},
		{"connection closed under the writer", io.EOF, "connection to the coordinator closed"},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, "network error"},
		{"LWT outcome unknown", fmt.Errorf("put item in cart: %w", cassandrastore.ErrOutcomeUnknown), "outcome of a conditional write unknown"},
		{"attempt or operation timeout", context.DeadlineExceeded, "store's own time limit"},
		{"speculative attempt cancelled", context.Canceled, "cancelled inside the store's client"},
		{"invalid query", &gocql.RequestErrInvalid{}, ""},
	},
	placement.Mongo: {
		{"shutting down", mongo.CommandError{Code: 91, Name: "ShutdownInProgress"}, "ShutdownInProgress"},
		{"not writable primary", mongo.CommandError{Code: 10107, Name: "NotWritablePrimary", Labels: []string{"RetryableWriteError"}}, "NotWritablePrimary"},
		{"write concern timeout", mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Name: "WriteConcernFailed", Code: 64}}, "WriteConcernFailed"},
		{"commit's write concern error", driver.WriteCommandError{WriteConcernError: &driver.WriteConcernError{Name: "InterruptedDueToReplStateChange", Code: 11602}}, "InterruptedDueToReplStateChange"},
		{"no primary to select", topology.ServerSelectionError{Wrapped: context.DeadlineExceeded}, "no member to send the operation to"},
		{"network error", mongo.CommandError{Labels: []string{"NetworkError"}}, "connection to a member lost"},
		{"transient transaction", mongo.CommandError{Code: 112, Name: "WriteConflict", Labels: []string{"TransientTransactionError"}}, "interrupted by a failover"},
		{"commit outcome unknown", mongo.CommandError{Code: 50, Name: "MaxTimeMSExpired", Labels: []string{"UnknownTransactionCommitResult"}}, "timed out waiting for the replica set"},
		{"operation timeout", context.DeadlineExceeded, "timed out waiting for the replica set"},
		{"cancelled inside the driver", context.Canceled, "cancelled inside the store's client"},
		{"bad value", mongo.CommandError{Code: 2, Name: "BadValue"}, ""},
	},
	placement.SQLite: {
		{"busy", sqlite3.Error{Code: sqlite3.ErrBusy}, "SQLITE_BUSY"},
		{"busy snapshot", sqlite3.Error{Code: sqlite3.ErrBusy, ExtendedCode: sqlite3.ErrBusySnapshot}, "SQLITE_BUSY"},
		{"locked", sqlite3.Error{Code: sqlite3.ErrLocked, ExtendedCode: sqlite3.ErrLockedSharedCache}, "SQLITE_LOCKED"},
		{"operation timeout", context.DeadlineExceeded, "store's own time limit"},
		{"cancelled inside the driver", context.Canceled, "cancelled inside the store's client"},
		{"corrupt", sqlite3.Error{Code: sqlite3.ErrCorrupt}, ""},
	},
}

// failing is the error a faulty repository returns (nil: it serves normally).
type failing struct{ err atomic.Pointer[error] }

func (f *failing) get() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Repositories that fail the one method their family's route reaches first, and serve the rest.
type (
	faultyOrders struct {
		order.Repository
		f *failing
	}
	faultyProducts struct {
		catalog.Repository
		f *failing
	}
	faultyUsers struct {
		account.Repository
		f *failing
	}
	faultyCarts struct {
		cart.Repository
		f *failing
	}
	faultySessions struct {
		session.Repository
		f *failing
	}
	faultyEvents struct {
		event.Repository
		f *failing
	}
	faultyHistory struct {
		history.Repository
		f *failing
	}
	faultyCatalog struct {
		placement.CatalogReader
		f *failing
	}
)

func (r faultyOrders) GetOrder(ctx context.Context, id string) (order.Order, error) {
	if err := r.f.get(); err != nil {
		return order.Order{}, err
	}
	return r.Repository.GetOrder(ctx, id)
}

func (r faultyProducts) AdjustStock(ctx context.Context, ref catalog.Ref, zone string, delta int64) (int64, error) {
	if err := r.f.get(); err != nil {
		return 0, err
	}
	return r.Repository.AdjustStock(ctx, ref, zone, delta)
}

func (r faultyUsers) CreateUser(ctx context.Context, u account.User) error {
	if err := r.f.get(); err != nil {
		return err
	}
	return r.Repository.CreateUser(ctx, u)
}

func (r faultyCarts) ActiveCart(ctx context.Context, owner cart.Owner, now time.Time) (cart.Cart, error) {
	if err := r.f.get(); err != nil {
		return cart.Cart{}, err
	}
	return r.Repository.ActiveCart(ctx, owner, now)
}

func (r faultySessions) GetSession(ctx context.Context, id string, now time.Time) (session.Session, error) {
	if err := r.f.get(); err != nil {
		return session.Session{}, err
	}
	return r.Repository.GetSession(ctx, id, now)
}

func (r faultyEvents) ListEvents(ctx context.Context, q event.Query) (paging.Page[event.Event], error) {
	if err := r.f.get(); err != nil {
		return paging.Page[event.Event]{}, err
	}
	return r.Repository.ListEvents(ctx, q)
}

func (r faultyHistory) ListHistory(ctx context.Context, userID string, page paging.Request) (paging.Page[history.Entry], error) {
	if err := r.f.get(); err != nil {
		return paging.Page[history.Entry]{}, err
	}
	return r.Repository.ListHistory(ctx, userID, page)
}

func (r faultyCatalog) GetProduct(ctx context.Context, id string) (catalog.Product, error) {
	if err := r.f.get(); err != nil {
		return catalog.Product{}, err
	}
	return r.CatalogReader.GetProduct(ctx, id)
}

// storeFamily is a family (by its repository's op prefix), where placement may put it, how a
// faulty repository replaces its own, and a request whose first store call reaches it.
type storeFamily struct {
	name     string
	family   placement.Family
	backends []string
	fault    func(s *placement.Stores, f *failing)
	request  func(t *testing.T, e *env) req
}

// The outbox reaches no HTTP answer: an order's follow-ups that fail are left to the projector.
var storeFamilies = []storeFamily{
	{"orders", placement.Orders, []string{placement.SQLite, placement.Mongo},
		func(s *placement.Stores, f *failing) { s.Orders = faultyOrders{s.Orders, f} },
		func(t *testing.T, e *env) req {
			tok, _ := e.user(t)
			return req{method: "GET", path: "/v1/orders/o-1", token: tok}
		}},
	{"products", placement.Orders, []string{placement.SQLite, placement.Mongo},
		func(s *placement.Stores, f *failing) { s.Products = faultyProducts{s.Products, f} },
		func(t *testing.T, e *env) req {
			return req{method: "POST", path: "/v1/products/p1/stock", admin: testAdminToken, body: map[string]any{"zone": "eu", "delta": 1}}
		}},
	{"users", placement.Orders, []string{placement.SQLite, placement.Mongo},
		func(s *placement.Stores, f *failing) { s.Users = faultyUsers{s.Users, f} },
		func(t *testing.T, e *env) req {
			return req{method: "POST", path: "/v1/users", token: e.guest(t), body: map[string]string{"email": "a@example.com", "password": "password123"}}
		}},
	{"carts", placement.Carts, []string{placement.SQLite, placement.Mongo, placement.Cassandra},
		func(s *placement.Stores, f *failing) { s.Carts = faultyCarts{s.Carts, f} },
		func(t *testing.T, e *env) req { return req{method: "GET", path: "/v1/cart", token: e.guest(t)} }},
	{"sessions", placement.Sessions, []string{placement.SQLite, placement.Mongo, placement.Cassandra},
		func(s *placement.Stores, f *failing) { s.Sessions = faultySessions{s.Sessions, f} },
		func(t *testing.T, e *env) req { return req{method: "GET", path: "/v1/cart", token: e.guest(t)} }},
	{"events", placement.Events, []string{placement.SQLite, placement.Mongo, placement.Cassandra},
		func(s *placement.Stores, f *failing) { s.Events = faultyEvents{s.Events, f} },
		func(t *testing.T, e *env) req { return req{method: "GET", path: "/v1/events", token: e.guest(t)} }},
	{"history", placement.History, []string{placement.SQLite, placement.Mongo, placement.Cassandra},
		func(s *placement.Stores, f *failing) { s.History = faultyHistory{s.History, f} },
		func(t *testing.T, e *env) req {
			tok, _ := e.user(t)
			return req{method: "GET", path: "/v1/orders", token: tok}
		}},
	{"catalog", placement.Catalog, []string{placement.SQLite, placement.Mongo, placement.Cassandra},
		func(s *placement.Stores, f *failing) { s.Catalog = faultyCatalog{s.Catalog, f} },
		func(t *testing.T, e *env) req { return req{method: "GET", path: "/v1/products/p1"} }},
}

// placedOn puts fam on backend, and what must go with it (MongoDB's catalog is its products
// collection, so a MongoDB placement here is MongoDB throughout).
func placedOn(t *testing.T, fam placement.Family, backend string) placement.Config {
	cfg := placement.Embedded()
	for _, f := range placement.Families {
		if backend == placement.Mongo || f == fam && backend != placement.SQLite {
			cfg[f] = backend
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestEveryStoreErrorClassAnswersOneWay is THE mapping of store errors to HTTP answers, for
// every backend's driver errors at every family's store boundary: each class is returned by a
// repository of the family, wrapped by placement's decorators as placement.Open wraps it (with
// the family placed on that backend), and served by the real API. A transient class answers
// 503 problem+json with Retry-After, its detail naming the family, the backend and the state
// with its level; our own bugs answer 500 (so the route does reach the faulty repository).
func TestEveryStoreErrorClassAnswersOneWay(t *testing.T) {
	for _, fam := range storeFamilies {
		for _, backend := range fam.backends {
			t.Run(fam.name+"/"+backend, func(t *testing.T) {
				f := new(failing)
				cfg := placedOn(t, fam.family, backend)
				e := newEnvStores(t, placement.Options{}, func(s *placement.Stores) *placement.Stores {
					faulty := &placement.Stores{Orders: s.Orders, Products: s.Products, Outbox: s.Outbox, Users: s.Users,
						Carts: s.Carts, Sessions: s.Sessions, Events: s.Events, History: s.History, Catalog: s.Catalog}
					fam.fault(faulty, f)
					faulty.Decorate(cfg, placement.Options{})
					return faulty
				}, nil)
				e.product(t, "p1", "toys", "2.00", 5)
				q := fam.request(t, e)
				if r := e.do(t, q); r.status >= 500 {
					t.Fatalf("%s %s before any fault: %d %s", q.method, q.path, r.status, r.body)
				}
				classes := append(storeErrorClasses[backend], storeErrorClass{"not a store error", errors.New("boom"), ""})
				for _, c := range classes {
					err := fmt.Errorf("%s store: %w", backend, c.err)
					f.err.Store(&err)
					r := e.do(t, q)
					f.err.Store(nil)
					if c.level == "" {
						if r.status != http.StatusInternalServerError {
							t.Errorf("%s: status %d, want 500 (our bug): %s", c.name, r.status, r.body)
						}
						continue
					}
					p := r.problem(t)
					where := fam.name + " on " + backend + ": "
					if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" ||
						!strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") || !strings.HasSuffix(p.Type, "/unavailable") {
						t.Errorf("%s: status %d, Retry-After %q, Content-Type %q, type %q; want 503, 1, problem+json, .../unavailable: %s",
							c.name, r.status, r.header.Get("Retry-After"), r.header.Get("Content-Type"), p.Type, r.body)
						continue
					}
					if !strings.Contains(p.Detail, where) || !strings.Contains(p.Detail, c.level) {
						t.Errorf("%s: detail %q, want it to name %q and %q", c.name, p.Detail, where, c.level)
					}
				}
			})
		}
	}
}
