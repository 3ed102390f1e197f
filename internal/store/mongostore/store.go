// Package mongostore is the MongoDB sharded-cluster backend on the official driver v2: orders with
// stock and the outbox (ORD-1 in one multi-document transaction), products, carts, sessions,
// click events, order history and users, behind the same repository interfaces as the embedded
// store and checked by the same contract suite (internal/store/storetest).
//
// Every operation that has the shard key in hand puts it in its filter so mongos targets one
// shard; the filters are built by the pure functions in filters.go
// and unit-tested for it. docs/mongodb.md (repository section) lists every operation with its
// filter and whether it is targeted under the chosen keys and their alternatives.
//
// Uniqueness that the shard key cannot give (idempotency keys, one order per cart, order and
// product ids, emails) lives in the claims collection: a claim's _id IS the unique value and
// the collection is sharded on {_id: "hashed"}, so the _id index enforces it cluster-wide and a
// lookup by it is targeted. On orders {user_id: "hashed"} a unique index on {user_id, idem_key}
// or on cart_id is impossible: a sharded collection enforces uniqueness only on an index
// prefixed by the shard key, never on a hashed one, and _id is unique only per shard when it is
// not the shard key (MongoDB manual, "Shard Key Indexes" and "Enforce Uniqueness on the Shard
// Key Values").
package mongostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/mongodb/access"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/readrouting"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/sharding"
)

// Collection names. orders, products, carts, sessions and events are sharded by
// internal/sharding's spec; ShardKeys lists the keys this package wants for the others.
const (
	collOrders      = "orders"
	collProducts    = "products"
	collCarts       = "carts"
	collSessions    = "sessions"
	collEvents      = "events"
	collHistory     = "order_history"
	collClaims      = "claims"
	collUsers       = "users"
	collOutbox      = "outbox"
	collCounters    = "counters"
	collCheckpoints = "outbox_checkpoints"
	collRateLimits  = "rate_limits"
)

// ShardKeys are the shard keys this backend is written for, per collection. The first five
// are SHD-1 plus additions; claims, order_history, users, outbox and
// counters are this package's own collections. The outbox is partitioned (outbox.go): rows are
// ranged on {p, seq} and the per-partition counters hashed on _id, so partitions spread over
// the shards. outbox_checkpoints (a few documents, written by the projector) stays unsharded.
var ShardKeys = map[string]bson.D{
	collOrders:   {e("user_id", "hashed")},
	collProducts: {e("category", 1), e("_id", 1)},
	collCarts:    {e("_id", "hashed")},
	collSessions: {e("_id", "hashed")},
	collEvents:   {e("_id", 1)},
	collHistory:  {e("user_id", "hashed")},
	collClaims:   {e("_id", "hashed")},
	collUsers:    {e("_id", "hashed")},
	collOutbox:   {e("p", 1), e("seq", 1)},
	collCounters: {e("_id", "hashed")},
	// One document per limit and key, always addressed by _id.
	collRateLimits: {e("_id", "hashed")},
}

// Options configure Open.
type Options struct {
	URI      string // a mongos (or, for development, a replica set)
	Database string
	// Lag returns the latest replication-lag measurement (readrouting.Monitor.Snapshot). Nil
	// means none is measured, and the read policy then sends every read to the primary.
	Lag func() readrouting.LagSnapshot
	// Policy decides each read's preference; the zero value means readrouting.NewPolicy().
	Policy *readrouting.Policy
	// OutboxPartitions is the number of outbox partitions of a new database (0:
	// DefaultOutboxPartitions); an existing database keeps the count it was created with.
	OutboxPartitions int
	// ObserveCommand, when set, receives every wire command's latency by command name ("find",
	// "commitTransaction"): the detail below a repository operation (store metrics).
	ObserveCommand func(command string, d time.Duration, err error)
	// Tracer, when set, adds a span per wire command to the traced request that sent it.
	Tracer trace.Tracer
	// Monitor, when set, also receives the driver's command events, with the context of the
	// operation that sent each command (tests count a request's commands with it).
	Monitor *mongoevent.CommandMonitor
	// OnRoute, when set, receives every routing decision a read makes (tests, logs, metrics).
	OnRoute func(readrouting.Decision)
	// Metrics, when set, receives the read routing's metrics (readrouting.Metrics): every
	// routed read by outcome and, once WatchLagWith runs, each member's lag and each set's
	// oplog window as the lag monitor measures them.
	Metrics prometheus.Registerer
}

// Store is an open MongoDB backend. Its family accessors serve placement.
type Store struct {
	client     *mongo.Client
	db         *mongo.Database
	policy     readrouting.Policy
	lag        func() readrouting.LagSnapshot
	stopLag    func()
	onRoute    func(readrouting.Decision)
	metrics    *readrouting.Metrics // nil without Options.Metrics
	ownsClient bool
	partitions int
	// unsharded: Open found a replica-set member, not a mongos; reads by _id alone then need
	// no claim to target a shard. New (a client tests built) leaves it false: the claim path
	// is right everywhere.
	unsharded bool
}

// Open connects to o.URI, checks the primary answers, and creates what is missing of the
// schema without touching what exists (EnsureSchema: missing indexes of non-empty collections
// and indexes of another shape are logged, not built or changed).
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.URI == "" {
		return nil, errors.New("mongo: no URI (set --mongo-uri or SHARDMART_MONGO_URI)")
	}
	if o.Database == "" {
		o.Database = sharding.DefaultDatabase
	}
	copts := ClientOptions(o.URI)
	if m := commandMonitor(o.ObserveCommand, o.Tracer, o.Monitor); m != nil {
		copts.SetMonitor(m)
	}
	client, err := mongo.Connect(copts)
	if err != nil {
		return nil, fmt.Errorf("mongo: connect: %w", err)
	}
	s := New(client, o)
	s.ownsClient = true
	if err := client.Ping(ctx, readpref.Primary()); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("mongo: ping %s: %w", redact(o.URI), access.Explain(err))
	}
	// A set that later becomes a shard is reached through a mongos from then on: a new URI,
	// so a new Open.
	var h helloReply
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&h); err == nil {
		kind, _ := lagTargetKind(h)
		s.unsharded = kind == "replset"
	}
	rep, err := s.EnsureSchema(ctx, false)
	if err != nil {
		_ = s.Close()
		if refused, ok := access.Refusal(err); ok {
			if refused.Kind == access.Unauthorized {
				// One hint: the command's own ("read", for listCollections) would undersell
				// what the shop needs.
				what, _, _ := strings.Cut(refused.Line, ": the user needs")
				return nil, &access.Error{Kind: refused.Kind, Err: refused.Err,
					Line: fmt.Sprintf("mongo: the shop's user needs readWrite on %s (%s)", o.Database, what)}
			}
			return nil, refused
		}
		return nil, err
	}
	for _, m := range rep.Missing {
		slog.Warn("mongo: index missing, not built at start-up", "index", m)
	}
	for _, c := range rep.Conflicts {
		slog.Warn("mongo: index differs from what this version wants; left as it is", "index", c)
	}
	return s, nil
}

// ConnectTimeout bounds each new connection's dial and handshake when the connection string
// does not say (connectTimeoutMS; the driver's default is 30 s). A member cut off by a network
// that drops packets answers no SYN, and Linux retransmits a SYN after 1, 3, 7, 15 and 31 s: a
// dial the driver's monitor started during the cut then stays in that back-off long after the
// cut heals, and the member (the primary again after its priority takeover) stays unselectable.
// On the fault-test set with the 30 s default the shop failed for 5-14 s after the set took
// writes again (3 of 9 cut-off runs); with 3 s a stale dial is abandoned within 3 s and the
// next (started at once while requests wait for a primary) connects: 11 of 13 runs reached the
// healed primary within 2.3 s of an independent client. It also bounds the monitor's streaming
// hello (timeout connectTimeout + heartbeat interval: 13 s instead of 40 s). Cost: a handshake
// slower than 3 s (TLS and SCRAM over a very slow link) fails and marks the member unknown.
const ConnectTimeout = 3 * time.Second

// ClientOptions are the driver options of Open: the URI's, with ConnectTimeout unless the URI
// sets connectTimeoutMS. Retryable reads and writes keep the driver's default (on).
func ClientOptions(uri string) *options.ClientOptions {
	copts := options.Client().ApplyURI(uri)
	if copts.ConnectTimeout == nil {
		copts.SetConnectTimeout(ConnectTimeout)
	}
	return copts
}

// New wraps an already connected client (tests use the driver's mock deployment). Every write
// is acknowledged by a majority: an acknowledged order, stock change or outbox row survives a
// primary failover.
func New(client *mongo.Client, o Options) *Store {
	if o.Database == "" {
		o.Database = sharding.DefaultDatabase
	}
	p := readrouting.NewPolicy()
	if o.Policy != nil {
		p = *o.Policy
	}
	db := client.Database(o.Database, options.Database().SetWriteConcern(writeconcern.Majority()))
	parts := o.OutboxPartitions
	if parts <= 0 {
		parts = DefaultOutboxPartitions
	}
	s := &Store{client: client, db: db, policy: p, lag: o.Lag, onRoute: o.OnRoute, partitions: parts}
	if o.Metrics != nil {
		// A second store on the same registry (one process, two stores) is not counted: its
		// reads would merge with the first's under the same labels.
		m := readrouting.NewMetrics()
		if err := o.Metrics.Register(m); err != nil {
			slog.Warn("mongo: read routing metrics not registered", "err", err)
		} else {
			s.metrics = m
		}
	}
	return s
}

// Ping asks the primary (through a mongos: a router that reaches one): writes can be taken.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx, readpref.Primary()); err != nil {
		return fmt.Errorf("mongo: %w", err)
	}
	return nil
}

// Close stops the lag monitor and disconnects a client Open created.
func (s *Store) Close() error {
	if s.stopLag != nil {
		s.stopLag()
		s.stopLag = nil
	}
	if !s.ownsClient {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.client.Disconnect(ctx)
}

// Database is the database the store uses.
func (s *Store) Database() *mongo.Database { return s.db }

// coll is a collection for writes and for reads that must see the latest data (primary).
func (s *Store) coll(name string) *mongo.Collection {
	return s.db.Collection(name, options.Collection().SetReadPreference(readpref.Primary()))
}

// reader is a collection whose reads follow the RPL-1 policy for op: a secondary only when
// every secondary is measurably within op's staleness budget, otherwise the primary.
func (s *Store) reader(name string, op readrouting.Operation) (*mongo.Collection, readrouting.Decision) {
	var snap readrouting.LagSnapshot
	if s.lag != nil {
		snap = s.lag()
	}
	d := s.policy.Decide(op, snap, time.Now())
	if s.onRoute != nil {
		s.onRoute(d)
	}
	if s.metrics != nil {
		s.metrics.Observe(d)
	}
	return s.routed(name, d), d
}

// routed is a collection reading where an earlier decision said, so that the reads of one
// operation (a claim, then the document it points at) go to the same kind of member.
func (s *Store) routed(name string, d readrouting.Decision) *mongo.Collection {
	return s.db.Collection(name, options.Collection().SetReadPreference(s.policy.ReadPrefFor(d)))
}

// outboxReader reads the outbox and checkpoints from the primary at majority read concern, so
// the projector never applies a commit that a failover could still roll back.
func (s *Store) outboxReader(name string) *mongo.Collection {
	return s.db.Collection(name, options.Collection().
		SetReadPreference(readpref.Primary()).SetReadConcern(readconcern.Majority()))
}

// Family accessors used by placement.
func (s *Store) Orders() order.Repository     { return (*orders)(s) }
func (s *Store) Products() catalog.Repository { return (*products)(s) }
func (s *Store) Outbox() outbox.Log           { return (*outboxLog)(s) }
func (s *Store) Users() account.Repository    { return (*users)(s) }
func (s *Store) Carts() cart.Repository       { return (*carts)(s) }
func (s *Store) Sessions() session.Repository { return (*sessions)(s) }
func (s *Store) Events() event.Repository     { return (*events)(s) }
func (s *Store) History() history.Repository  { return (*historyRepo)(s) }

// redact drops credentials from a URI for error messages.
func redact(uri string) string {
	const scheme = "://"
	for i := 0; i+len(scheme) <= len(uri); i++ {
		if uri[i:i+len(scheme)] == scheme {
			rest := uri[i+len(scheme):]
			for j := 0; j < len(rest) && rest[j] != '/'; j++ {
				if rest[j] == '@' {
					return uri[:i+len(scheme)] + "***@" + rest[j+1:]
				}
			}
			return uri
		}
	}
	return uri
}
