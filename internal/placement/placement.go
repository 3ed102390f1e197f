// Package placement decides which backend holds which data family and opens the repositories
// accordingly, so moving a family to another backend (`shardmart migrate`) ends in a change
// of configuration.
package placement

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/projection"
	"github.com/shardmart/shardmart/internal/ratelimit"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// Family is a group of data that moves between backends as one (internal/family declares them).
type Family = family.Name

// The families, as internal/family declares them.
const (
	Orders   = family.Orders
	Carts    = family.Carts
	Sessions = family.Sessions
	Events   = family.Events
	History  = family.History
	Catalog  = family.Catalog
)

// Families lists every family in a stable order.
var Families = family.All()

// Backend names.
const (
	SQLite    = family.SQLite
	Cassandra = family.Cassandra
	Mongo     = family.Mongo
)

// Config maps each family to a backend name.
type Config map[Family]string

// Embedded is the one-machine default: everything in SQLite.
func Embedded() Config { return All(SQLite) }

// All puts every family on backend.
func All(backend string) Config {
	c := Config{}
	for _, f := range Families {
		c[f] = backend
	}
	return c
}

// productsAlias names the products, which live in the orders family (a stock change and the
// order that takes it commit in one transaction). "products=X" is accepted when it agrees with
// the orders family, so a placement can name what it puts where.
const productsAlias = "products"

// Parse reads "carts=cassandra,sessions=cassandra" over the embedded default.
func Parse(s string) (Config, error) {
	c := Embedded()
	if strings.TrimSpace(s) == "" {
		return c, nil
	}
	var products string
	for _, part := range strings.Split(s, ",") {
		fam, backend, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("placement %q: want family=backend", part)
		}
		f := Family(strings.TrimSpace(fam))
		if f == productsAlias {
			products = strings.TrimSpace(backend)
			continue
		}
		if _, known := c[f]; !known {
			return nil, fmt.Errorf("placement: unknown family %q (known: %s; products go with orders)", fam, familyNames())
		}
		c[f] = strings.TrimSpace(backend)
	}
	if products != "" && products != c[Orders] {
		return nil, fmt.Errorf("placement: products=%s but orders=%s: products live with orders (one transaction takes stock and places the order)", products, c[Orders])
	}
	return c, c.Validate()
}

// Validate refuses placements a backend cannot serve.
func (c Config) Validate() error {
	for _, spec := range family.Specs {
		b := c[spec.Name]
		if _, known := openers[b]; !known {
			return fmt.Errorf("placement: family %s: unknown backend %q (sqlite, cassandra, mongo)", spec.Name, b)
		}
		if !spec.Holds(b) {
			if spec.Name == Orders {
				return errors.New("placement: orders need multi-row transactions (stock, outbox); Cassandra cannot hold them")
			}
			return fmt.Errorf("placement: the %s backend cannot hold family %s", b, spec.Name)
		}
	}
	return nil
}

// Uses reports whether some family lives on backend.
func (c Config) Uses(backend string) bool {
	for _, b := range c {
		if b == backend {
			return true
		}
	}
	return false
}

// String renders the config as Parse reads it.
func (c Config) String() string {
	parts := make([]string, 0, len(c))
	for _, f := range Families {
		parts = append(parts, string(f)+"="+c[f])
	}
	return strings.Join(parts, ",")
}

func familyNames() string {
	names := make([]string, len(Families))
	for i, f := range Families {
		names[i] = string(f)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Stores are the repositories serving each family.
type Stores struct {
	Orders   order.Repository
	Products catalog.Repository
	Outbox   outbox.Log
	Users    account.Repository
	Carts    cart.Repository
	Sessions session.Repository
	Events   event.Repository
	History  history.Repository
	// Catalog serves product reads (search, product page); it is Products unless the catalog
	// family lives elsewhere, and CatalogSink is then where the projector writes it.
	Catalog     CatalogReader
	CatalogSink projection.CatalogSink
	// ProductSource reads a product as the store of record holds it now, never from a lagging
	// replica: the projector copies what it reads into the read model.
	ProductSource projection.ProductSource
	// RateLimits are rate-limit counters every API process of the shop shares, in the
	// transactional store when it can be shared (MongoDB); nil for the embedded store, which
	// one process alone may open: its limits are counted in that process.
	RateLimits RateLimiter

	closers []func() error
	pings   []namedPing
	opened  map[string]backend
	opts    Options
}

// OnClose adds fn to what Close runs (in reverse order of adding), for something opened
// around the stores.
func (s *Stores) OnClose(fn func() error) { s.closers = append(s.closers, fn) }

// CassandraStore is the Cassandra backend the placement opened, or one opened now with the
// same options (the dual-write layer copies into it), which Close closes and Ready pings.
func (s *Stores) CassandraStore(ctx context.Context) (*cassandrastore.Store, error) {
	if b, ok := s.opened[Cassandra].(cassandraBackend); ok {
		return b.st, nil
	}
	b, err := openCassandra(ctx, s.opts)
	if err != nil {
		return nil, err
	}
	s.opened[Cassandra] = b
	s.OnClose(b.Close)
	s.pings = append(s.pings, namedPing{backend: Cassandra, ping: b.Ping})
	return b.(cassandraBackend).st, nil
}

type namedPing struct {
	backend string
	ping    func(ctx context.Context) error
}

// DownError names the backends that did not answer a readiness check.
type DownError struct {
	Down map[string]error // backend name -> why
}

func (e *DownError) Error() string {
	names := e.Backends()
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s: %v", n, e.Down[n])
	}
	return "backend down: " + strings.Join(parts, "; ")
}

// Backends names the down backends, sorted.
func (e *DownError) Backends() []string {
	names := make([]string, 0, len(e.Down))
	for n := range e.Down {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Ready pings every backend the placement opened, in parallel, each within ctx: nil when all
// answer, else a *DownError naming those that did not.
func (s *Stores) Ready(ctx context.Context) error {
	errs := make([]error, len(s.pings))
	var wg sync.WaitGroup
	for i, p := range s.pings {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.ping(ctx)
		}()
	}
	wg.Wait()
	down := map[string]error{}
	for i, err := range errs {
		if err != nil {
			down[s.pings[i].backend] = err
		}
	}
	if len(down) > 0 {
		return &DownError{Down: down}
	}
	return nil
}

// CatalogReader is the read side of the catalog.
type CatalogReader = catalog.Reader

// Close closes every opened backend.
func (s *Stores) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	return errors.Join(errs...)
}

// Options locate the backends; only those a placement uses are opened.
type Options struct {
	SQLitePath        string   // embedded database file
	CassandraHosts    []string // contact points, e.g. 127.0.0.1
	CassandraKeyspace string
	CassandraConn     cassandrastore.Connection // login, TLS, local DC
	CassandraNumConns int                       // driver connections per node (0: the store's default)
	MongoURI          string                    // a mongos
	MongoDatabase     string
	// MongoMonitorUser and MongoMonitorPassword, when set, are the replication-lag monitor's
	// login on the replica sets it connects to (each shard behind the mongos, or the replica
	// set itself), in place of MongoURI's: mongos users do not exist on the shards.
	MongoMonitorUser     string
	MongoMonitorPassword string
	// EventRetention is how long events are kept (Cassandra writes it as the rows' TTL).
	EventRetention time.Duration
	// Observe, when set, receives every repository call: the backend serving its family and
	// the operation "<family>.<method>" ("carts.put_item"), the same names on every backend.
	Observe func(backend, op string, d time.Duration, err error)
	// ObserveStatement, when set, receives the backend-specific detail below the operations:
	// each Cassandra statement ("select.user_carts") and MongoDB wire command ("find").
	ObserveStatement func(backend, statement string, d time.Duration, err error)
	// MongoCommandMonitor, when set, also receives the MongoDB driver's command events with each
	// operation's context (tests count the commands a request sends).
	MongoCommandMonitor *mongoevent.CommandMonitor
	// Tracer, when set, traces the requests it samples: a span per repository operation and,
	// through each driver's hooks, per statement or wire command. Nil: nothing is traced.
	Tracer trace.Tracer
	// Outcome, when set, names a repository call's outcome on its span (ok, not_found,
	// rejected, canceled, error: httpapi.StoreOutcome, the metric's reading); nil: any error
	// is "error".
	Outcome func(error) string
	// CassandraMetrics, when set, receives the Cassandra client's per-host metrics (requests
	// by host and outcome, speculative executions, retries, hosts avoided).
	CassandraMetrics prometheus.Registerer
	// MongoMetrics, when set, receives the MongoDB read routing's metrics (reads by outcome,
	// each member's lag, each set's oplog window: readrouting.Metrics).
	MongoMetrics prometheus.Registerer
	// Migrations turns on the dual-write layer (internal/dualwrite, which shop.Open puts in
	// Wrap): families in an old store follow their phase in Cassandra's migration_state
	// (dual writes, then cutover).
	Migrations bool
	// MigrationTarget is the store the migrations move into: Cassandra ("" or cassandra) or
	// MongoDB (mongo: MongoURI's MongoDatabase holds the state, `migrate --to mongo`).
	MigrationTarget string
	// Wrap, when set, wraps the opened repositories before they are decorated, so the
	// decorators observe each call once, under the family's placement.
	Wrap func(ctx context.Context, s *Stores, cfg Config) error
	// MigrationError, when set, receives each change the dual write could not copy to
	// Cassandra (the request succeeded: the old store is the source of truth).
	MigrationError func(f Family, key string, err error)
}

// statements binds ObserveStatement to one backend; nil when it is not set.
func (o Options) statements(backend string) func(statement string, d time.Duration, err error) {
	if o.ObserveStatement == nil {
		return nil
	}
	return func(statement string, d time.Duration, err error) { o.ObserveStatement(backend, statement, d, err) }
}

// A backend provides some of the family interfaces below; placement asks each for what the
// configuration assigns to it.
type backend interface {
	Close() error
	// Ping checks that the backend answers now (readiness).
	Ping(ctx context.Context) error
}

type ordersProvider interface {
	Orders() order.Repository
	Products() catalog.Repository
	Outbox() outbox.Log
	Users() account.Repository
}
type cartsProvider interface{ Carts() cart.Repository }
type sessionsProvider interface{ Sessions() session.Repository }
type eventsProvider interface{ Events() event.Repository }
type historyProvider interface{ History() history.Repository }

// RateLimiter counts one limit's requests per key over every process (GCRA: ratelimit.Limit.Decide).
type RateLimiter interface {
	Allow(ctx context.Context, name string, l ratelimit.Limit, key string, now time.Time) (bool, time.Duration, error)
}

// rateLimitsProvider is a transactional store several processes share.
type rateLimitsProvider interface{ SharedRateLimits() RateLimiter }

// currentReader is a products repository whose GetProduct may read a replica (MongoDB's read
// table) and that can also read the latest state.
type currentReader interface {
	CurrentProduct(ctx context.Context, id string) (catalog.Product, error)
}

type currentSource struct{ r currentReader }

func (c currentSource) GetProduct(ctx context.Context, id string) (catalog.Product, error) {
	return c.r.CurrentProduct(ctx, id)
}

// sourceOf is the products repository as a ProductSource reading the latest state.
func sourceOf(r catalog.Repository) projection.ProductSource {
	if c, ok := r.(currentReader); ok {
		return currentSource{c}
	}
	return r
}

// catalogProvider is a read model fed by the projector (Cassandra's products tables).
type catalogProvider interface {
	Catalog() CatalogReader
	CatalogSink() projection.CatalogSink
}

// openers: one per backend, each in its own file (placement_<backend>.go).
var openers = map[string]func(ctx context.Context, o Options) (backend, error){
	SQLite:    openSQLite,
	Cassandra: openCassandra,
	Mongo:     openMongo,
}

// Open opens the backends cfg uses and returns the repositories per family.
func Open(ctx context.Context, cfg Config, o Options) (*Stores, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Stores{}
	opened := map[string]backend{}
	for _, f := range Families {
		name := cfg[f]
		if _, ok := opened[name]; ok {
			continue
		}
		b, err := openers[name](ctx, o)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("open %s backend: %w", name, err)
		}
		opened[name] = b
		s.closers = append(s.closers, b.Close)
		s.pings = append(s.pings, namedPing{backend: name, ping: b.Ping})
	}
	var errs []error
	for _, f := range Families {
		if !fills[f](s, opened[cfg[f]], cfg) {
			errs = append(errs, fmt.Errorf("placement: the %s backend cannot hold family %s", cfg[f], f))
		}
	}
	if err := errors.Join(errs...); err != nil {
		_ = s.Close()
		return nil, err
	}
	s.opened, s.opts = opened, o
	if o.Wrap != nil {
		if err := o.Wrap(ctx, s, cfg); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	s.Decorate(cfg, o)
	return s, nil
}
