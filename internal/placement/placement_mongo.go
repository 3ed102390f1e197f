package placement

import (
	"context"
	"log/slog"
	"time"

	"github.com/shardmart/shardmart/internal/readrouting"
	"github.com/shardmart/shardmart/internal/store/mongostore"
)

// openMongo opens the MongoDB backend: it serves orders with products, stock, the
// outbox and users, and carts, sessions, events and history, so a MongoDB-only placement works.
// Reads follow RPL-1 through a replication-lag monitor: over the shards behind a mongos, or
// over the replica set itself when MongoURI names one. The monitor logs in with
// MongoMonitorUser/MongoMonitorPassword when given (mongos users do not exist on the shards),
// else with MongoURI's credentials. If it cannot start (a standalone mongod, no access to
// config.shards) every read goes to the primary, which is slower but never stale.
func openMongo(ctx context.Context, o Options) (backend, error) {
	s, err := openMongoStore(ctx, o)
	if err != nil {
		return nil, err
	}
	return mongoBackend{s}, nil
}

// mongoBackend is the store with its shared rate limits offered to placement.
type mongoBackend struct{ *mongostore.Store }

func (b mongoBackend) SharedRateLimits() RateLimiter { return b.RateLimits() }

func openMongoStore(ctx context.Context, o Options) (*mongostore.Store, error) {
	s, err := mongostore.Open(ctx, mongostore.Options{URI: o.MongoURI, Database: o.MongoDatabase, ObserveCommand: o.statements(Mongo),
		Tracer: o.Tracer, Metrics: o.MongoMetrics, Monitor: o.MongoCommandMonitor})
	if err != nil {
		return nil, err
	}
	err = s.WatchLagWith(ctx, o.MongoURI, mongostore.LagOptions{
		Interval:    time.Second,
		Credentials: readrouting.Credentials{User: o.MongoMonitorUser, Password: o.MongoMonitorPassword},
	})
	if err != nil {
		slog.Warn("mongo: secondary reads disabled, every read goes to the primary", "err", err)
	}
	return s, nil
}

// The MongoDB store holds every family but the projector-fed Cassandra catalog read model (on
// MongoDB the catalog family is the products collection itself).
var (
	_ ordersProvider     = (*mongostore.Store)(nil)
	_ rateLimitsProvider = mongoBackend{}
	_ cartsProvider      = (*mongostore.Store)(nil)
	_ sessionsProvider   = (*mongostore.Store)(nil)
	_ eventsProvider     = (*mongostore.Store)(nil)
	_ historyProvider    = (*mongostore.Store)(nil)
)
