package cli

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/shop"
)

// backendFlags are the store settings shared by serve and seed.
type backendFlags struct {
	dataDir           string
	placement         string
	cassandraHosts    string
	cassandraKeyspace string
	cassandraConn     cassandraConnFlags
	cassandraConns    int // connections per host (0: the store's default)
	mongoURI          string
	mongoDB           string
	sessionTTL        time.Duration
	eventRetention    time.Duration
	// The replication-lag monitor's own login (placement.Options.MongoMonitorUser/Password).
	mongoMonitorUser     string
	mongoMonitorPassword string
	// migrations: follow the migration state in Cassandra (placement.Options.Migrations).
	migrations bool
	// migrationsTo: the store the migrations move into (placement.Options.MigrationTarget).
	migrationsTo string
}

func (b *backendFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	b.registerStores(f)
	f.IntVar(&b.cassandraConns, "cassandra-conns-per-host", 0, "Cassandra driver connections per node (0: the default, 2)")
	f.StringVar(&b.placement, "placement", "", `which backend holds which family, over the embedded default, e.g. "carts=cassandra,sessions=cassandra" (families: orders, carts, sessions, events, history, catalog)`)
	f.StringVar(&b.mongoMonitorUser, "mongo-monitor-user", "", "user the read-routing lag monitor logs in with on each shard replica set behind the mongos (or on the replica set --mongo-uri names), instead of --mongo-uri's: mongos users do not exist on the shards. A shard-local user in admin (authSource from --mongo-uri, else admin) with clusterMonitor and readWrite on shardmart_monitor; empty: --mongo-uri's credentials")
	f.StringVar(&b.mongoMonitorPassword, "mongo-monitor-password", "", "password of --mongo-monitor-user; prefer the environment to the command line")
	f.DurationVar(&b.sessionTTL, "session-ttl", session.DefaultTTL, "session lifetime; guest carts expire with their session")
	f.BoolVar(&b.migrations, "migrations", false, "follow the migration state in the Cassandra keyspace (shardmart migrate): dual-write the families being migrated, serve those cut over from Cassandra. Every shop process must run with it before a migrate run")
	fromEnv(f, "migrations", "SHARDMART_MIGRATIONS")
	f.StringVar(&b.migrationsTo, "migrations-to", placement.Cassandra, "with --migrations: the store the migrations move into, cassandra or mongo (migrate --to mongo: the state is in --mongo-uri's --mongo-db)")
	fromEnv(f, "placement", "SHARDMART_PLACEMENT")
	fromEnv(f, "mongo-monitor-user", "SHARDMART_MONGO_MONITOR_USER")
	fromEnv(f, "mongo-monitor-password", "SHARDMART_MONGO_MONITOR_PASSWORD")
}

// registerStores adds to f the flags that locate the stores (and the events' retention, which
// their rows' lifetime follows): all that migrate needs of them.
func (b *backendFlags) registerStores(f *pflag.FlagSet) {
	f.StringVar(&b.dataDir, "data-dir", "./data", "directory of the embedded store")
	f.StringVar(&b.cassandraHosts, "cassandra-hosts", "127.0.0.1", "Cassandra contact points, comma-separated")
	f.StringVar(&b.cassandraKeyspace, "cassandra-keyspace", "shardmart", "Cassandra keyspace")
	f.StringVar(&b.mongoURI, "mongo-uri", "", "MongoDB connection string of a mongos")
	f.StringVar(&b.mongoDB, "mongo-db", "shardmart", "MongoDB database")
	f.DurationVar(&b.eventRetention, "event-retention", event.DefaultRetention, "how long click events are kept (Cassandra: the rows' TTL; elsewhere: deleted by the purge loop)")
	fromEnv(f, "data-dir", "SHARDMART_DATA_DIR")
	fromEnv(f, "cassandra-hosts", "SHARDMART_CASSANDRA_HOSTS")
	fromEnv(f, "cassandra-keyspace", "SHARDMART_CASSANDRA_KEYSPACE")
	b.cassandraConn.register(f)
	fromEnv(f, "mongo-uri", "SHARDMART_MONGO_URI")
	fromEnv(f, "mongo-db", "SHARDMART_MONGO_DB")
}

func (b *backendFlags) config(logger *slog.Logger) (shop.Config, error) {
	pl, err := placement.Parse(b.placement)
	if err != nil {
		return shop.Config{}, err
	}
	if b.sessionTTL < time.Minute {
		return shop.Config{}, fmt.Errorf("--session-ttl must be at least 1m, got %s", b.sessionTTL)
	}
	if b.cassandraConns < 0 {
		return shop.Config{}, fmt.Errorf("--cassandra-conns-per-host must be 0 (the default) or more, got %d", b.cassandraConns)
	}
	if b.eventRetention < time.Hour {
		return shop.Config{}, fmt.Errorf("--event-retention must be at least 1h, got %s", b.eventRetention)
	}
	hosts := b.hosts()
	conn, err := b.cassandraConn.connection()
	if err != nil {
		return shop.Config{}, err
	}
	return shop.Config{
		Placement: pl,
		Backends: placement.Options{
			SQLitePath:        b.sqlitePath(),
			CassandraHosts:    hosts,
			CassandraKeyspace: b.cassandraKeyspace,
			CassandraConn:     conn,
			CassandraNumConns: b.cassandraConns,
			MongoURI:          b.mongoURI,
			MongoDatabase:     b.mongoDB,

			MongoMonitorUser:     b.mongoMonitorUser,
			MongoMonitorPassword: b.mongoMonitorPassword,
			EventRetention:       b.eventRetention,
			Migrations:           b.migrations,
			MigrationTarget:      b.migrationsTo,
		},
		SessionTTL: b.sessionTTL,
		Logger:     logger,
	}, nil
}

// hosts are the Cassandra contact points.
func (b *backendFlags) hosts() []string {
	var hosts []string
	for _, h := range strings.Split(b.cassandraHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// sqlitePath is the embedded store's file.
func (b *backendFlags) sqlitePath() string { return filepath.Join(b.dataDir, "shardmart.db") }
