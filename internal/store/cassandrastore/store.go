// Package cassandrastore is the Apache Cassandra backend for the families placement may put
// there: carts, order history, sessions, click events and the catalog read model.
// It talks to the cluster through github.com/apache/cassandra-gocql-driver/v2 with the
// consistency levels of CAS-1, prepared statements (the driver prepares every bound
// statement once and caches it), the driver's paging state behind opaque cursors, TTLs on
// every write of expiring data, and a client policy per statement kind (policy.go): idempotent
// statements speculate and retry on the next replica, lightweight transactions never do (casLoop
// settles an unknown outcome by a read at SERIAL), and a host that stops answering is tried last.
//
// The data model is in schema/*.cql and docs/cassandra.md.
package cassandrastore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/session"
)

// Config locates the cluster.
type Config struct {
	Hosts    []string // contact points, e.g. 127.0.0.1 (port 9042 unless host:port)
	Keyspace string   // default DefaultKeyspace
	// Connection is the login, TLS and local DC.
	Connection
	Timeout  time.Duration // per attempt of a statement, default attemptTimeout
	NumConns int           // connections per host, default 2
	// WriteCoalesce is how long a connection waits for more frames before writing them in one
	// system call; 0 is DefaultWriteCoalesce (off), negative is off.
	WriteCoalesce time.Duration
	// ObserveStatement, when set, receives every statement's latency as "<verb>.<table>"
	// (statementName): the detail below a repository operation (store metrics).
	ObserveStatement func(statement string, d time.Duration, err error)
	// Tracer, when set, adds a span per statement attempt to the traced request that ran it.
	Tracer trace.Tracer
	// ReadOnly skips the start-up proof of MODIFY (checkWrite) for callers that only read
	// (migrate status): they need no grant to write and leave no tombstone.
	ReadOnly bool
	// EventRetention is how long events live after their time (TTL); 0: event.DefaultRetention.
	EventRetention time.Duration
	// Metrics, when set, receives the client's per-host metrics (clientmetrics.go).
	Metrics prometheus.Registerer
}

// DefaultWriteCoalesce is off: each frame is written at once. The driver's default, 200 µs,
// hands every frame to a flusher goroutine that waits on a timer before the write; measured on
// one node (docs/evidence/cassandra.md, "Small-host settings and write coalescing"), a lone
// client's cart read took 2.2 ms at the median with it and 0.7 ms without, and 16 clients were
// no faster with it.
const DefaultWriteCoalesce time.Duration = 0

// DefaultKeyspace is used when Config.Keyspace is empty.
const DefaultKeyspace = "shardmart"

// ClusterConfig turns cfg into the driver's configuration: token-aware routing over shuffled
// replicas with hosts that stopped answering tried last (health.go), short attempts, fast
// reconnection of a host that comes back, and no default idempotence: each statement says
// (policy.go).
// It fails only on unreadable TLS files or a password without a user.
func ClusterConfig(cfg Config) (*gocql.ClusterConfig, error) {
	c, _, err := clusterConfig(cfg)
	return c, err
}

func clusterConfig(cfg Config) (*gocql.ClusterConfig, *policy, error) {
	c := gocql.NewCluster(cfg.Hosts...)
	if err := cfg.Connection.Apply(c); err != nil {
		return nil, nil, err
	}
	c.Keyspace = cfg.Keyspace
	if c.Keyspace == "" {
		c.Keyspace = DefaultKeyspace
	}
	c.Timeout = cfg.Timeout
	if c.Timeout == 0 {
		c.Timeout = attemptTimeout
	}
	c.ConnectTimeout = 5 * time.Second
	// A host marked down (its connections failed) is tried again every second instead of every
	// minute, so a restarted node takes traffic as soon as it listens; a refused dial is not
	// retried within one reconnection.
	c.ReconnectInterval = time.Second
	c.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 2, Interval: 200 * time.Millisecond}
	c.NumConns = cfg.NumConns
	if c.NumConns == 0 {
		c.NumConns = 2
	}
	switch c.WriteCoalesceWaitTime = cfg.WriteCoalesce; {
	case cfg.WriteCoalesce == 0:
		c.WriteCoalesceWaitTime = DefaultWriteCoalesce
	case cfg.WriteCoalesce < 0:
		c.WriteCoalesceWaitTime = 0 // the driver's "off"
	}
	cl := cfg.Connection.Levels()
	p := &policy{health: newHostHealth(), latency: newRecentP99(), cl: cl}
	fallback := gocql.RoundRobinHostPolicy()
	if cfg.Datacenter != "" {
		fallback = gocql.DCAwareRoundRobinPolicy(cfg.Datacenter)
		// The DC-aware policy offers remote nodes after local ones, and a remote coordinator
		// would apply LOCAL_QUORUM to its own DC: no connection to them at all.
		c.HostFilter = gocql.DataCenterHostFilter(cfg.Datacenter)
	}
	tiered := &tieredHosts{HostSelectionPolicy: fallback, health: p.health}
	c.PoolConfig.HostSelectionPolicy = &quickRouting{
		HostSelectionPolicy: gocql.TokenAwareHostPolicy(tiered, gocql.ShuffleReplicas(), gocql.NonLocalReplicasFallback()),
		fallback:            tiered,
		health:              p.health,
	}
	c.StreamObserver = streamWatch{p.health}
	c.SerialConsistency = cl.Serial
	c.DefaultIdempotence = false
	c.Consistency = cl.quorum()
	c.Logger = gocql.NewLogger(gocql.LogLevelWarn)
	if cfg.Metrics != nil {
		p.metrics = newClientMetrics(cfg.Metrics, p.health)
	}
	w := attemptWatch{health: p.health, latency: p.latency, metrics: p.metrics, tracer: cfg.Tracer}
	if cfg.ObserveStatement != nil {
		w.stmt = observer(cfg.ObserveStatement)
	}
	c.QueryObserver, c.BatchObserver = w, w
	return c, p, nil
}

// Store is the backend: one driver session and the repositories on it.
type Store struct {
	s     *gocql.Session
	p     *policy
	owned bool
	// eventRetention is how long after the event's time its row lives (USING TTL), 90 days
	// unless configured: the table's default_time_to_live counts from the write instead.
	eventRetention time.Duration
	// activeCarts remembers the active cart (generation) last seen per owner, so a cart is read by its
	// exact key (carts.loadActive); nil reads every cart with the partition's head.
	activeCarts *lru.Cache[string, cartHint]
}

// Open connects to the cluster and checks that the schema has been applied
// (`shardmart cassandra schema apply`).
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("cassandra: no contact points (--cassandra-hosts)")
	}
	cc, p, err := clusterConfig(cfg)
	if err != nil {
		return nil, err
	}
	s, err := openChecked(ctx, cfg, cc)
	if err != nil {
		return nil, err
	}
	st := &Store{s: s, p: p, owned: true, eventRetention: cfg.EventRetention, activeCarts: newActiveCarts()}
	if err := st.checkSchema(ctx); err != nil {
		s.Close()
		if perr := permissionError(cfg, "read "+cc.Keyspace+".schema_migrations", err); perr != nil {
			return nil, perr
		}
		return nil, err
	}
	if cfg.ReadOnly {
		return st, nil
	}
	if err := st.checkWrite(ctx); err != nil {
		s.Close()
		if perr := permissionError(cfg, "write to keyspace "+cc.Keyspace, err); perr != nil {
			return nil, perr
		}
		return nil, err
	}
	return st, nil
}

// Session is the driver session, for callers that need raw statements (benchmarks, tests).
func (st *Store) Session() *gocql.Session { return st.s }

// Ping asks a node for its version: the cluster answers at all (ONE, any node).
func (st *Store) Ping(ctx context.Context) error {
	var v string
	if err := st.p.idempotent(ctx, st.s.Query(`SELECT release_version FROM system.local`).Consistency(st.p.levels().one())).Scan(&v); err != nil {
		return fmt.Errorf("cassandra: %w", err)
	}
	return nil
}

// Close closes the session if Open created it.
func (st *Store) Close() error {
	if st.owned {
		st.s.Close()
	}
	return nil
}

// Carts, Sessions, Events, History, Catalog and CatalogSink are the repositories.
func (st *Store) Carts() cart.Repository       { return (*carts)(st) }
func (st *Store) Sessions() session.Repository { return (*sessions)(st) }
func (st *Store) Events() event.Repository     { return (*events)(st) }
func (st *Store) History() history.Repository  { return (*historyRepo)(st) }
func (st *Store) Catalog() *Catalog            { return (*Catalog)(st) }

// Levels are the consistency levels this store's statements use.
func (st *Store) Levels() Levels { return st.p.levels() }

func (st *Store) checkSchema(ctx context.Context) error {
	var v int
	err := st.p.idempotent(ctx, st.s.Query(`SELECT max(version) FROM schema_migrations`).Consistency(st.p.levels().one())).Scan(&v)
	if err != nil {
		return fmt.Errorf("cassandra: schema version %d, want %d: run `shardmart cassandra schema apply` first (%w)", v, LatestVersion(), err)
	}
	return schemaBehind(v)
}

// schemaBehind fails when the applied version v is older than this build's.
func schemaBehind(v int) error {
	if v < LatestVersion() {
		return fmt.Errorf("cassandra: schema version %d, want %d: run `shardmart cassandra schema apply` first", v, LatestVersion())
	}
	return nil
}

// checkWrite proves at start that the login may modify the keyspace, so a missing grant is one
// line at start rather than an error on every write: it deletes a version that never exists (one
// tombstone in a tiny table per start; the server checks the permission before writing).
func (st *Store) checkWrite(ctx context.Context) error {
	return st.p.idempotent(ctx, st.s.Query(`DELETE FROM schema_migrations WHERE version = -1`).Consistency(st.p.levels().one())).Exec()
}

// ts binds a timestamp column: the zero time is null, everything else milliseconds.
func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Truncate(time.Millisecond)
}

// ttlUntil is the TTL in whole seconds that keeps data alive until exp as seen at now,
// rounded up so data never vanishes before its logical expiry (reads also filter on the
// stored expiry, so the extra fraction of a second is never visible). At least 1: a TTL of
// 0 means "never expires" in CQL.
func ttlUntil(exp, now time.Time) int {
	if exp.IsZero() {
		return 0
	}
	d := exp.Sub(now)
	if d <= 0 {
		return 1
	}
	s := math.Ceil(d.Seconds())
	if s > maxTTL {
		return maxTTL
	}
	return int(s)
}

// maxTTL is Cassandra's limit (20 years).
const maxTTL = 630720000
