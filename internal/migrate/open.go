package migrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// The old stores a family moves from.
const (
	FromSQLite = "sqlite"
	FromMongo  = "mongo"
)

// Stores locate the old store and Cassandra.
type Stores struct {
	From           string // FromSQLite or FromMongo
	SQLitePath     string
	MongoURI       string
	MongoDatabase  string
	CassandraHosts []string
	Keyspace       string
	CassandraConn  cassandrastore.Connection // login, TLS, local DC
	// Session, when set, is an open session in the shop's keyspace (a shop process's), used
	// instead of connecting to CassandraHosts.
	Session *gocql.Session
	// EventRetention is the events' retention, for their TTL (0: event.DefaultRetention).
	EventRetention time.Duration
	// ReadOnly: the caller only reads the target (migrate status), so Cassandra's login needs
	// no MODIFY grant.
	ReadOnly bool
}

// Env is an open old store and target.
type Env struct {
	Src MirrorSource
	Dst *Target
	// Close closes what Open opened (not a Session passed in).
	Close func()
}

// ErrNoMongoURI is Open's answer to a MongoDB old store without a URI.
var ErrNoMongoURI = errors.New("migrate: the mongo old store needs a URI")

// Open opens the old store read-only and the target. A MongoDB old store gets the key
// indexes its range reads need (EnsureIndexes; building an existing index is a no-op), kept
// until dropped by hand: every reader of it (a migrate verb, a shop's dual write) reads carts
// and events by key.
func Open(ctx context.Context, o Stores) (*Env, error) {
	src, closeSrc, err := openOld(ctx, o)
	if err != nil {
		return nil, err
	}
	dst, closeDst := NewTarget(o.Session), func() {}
	dst.Retention = o.EventRetention
	dst.Levels = o.CassandraConn.Levels()
	if o.Session == nil {
		if dst, closeDst, err = OpenTarget(ctx, o); err != nil {
			closeSrc()
			return nil, err
		}
	}
	return &Env{Src: src, Dst: dst, Close: func() { closeDst(); closeSrc() }}, nil
}

// OpenTarget connects to the shop's keyspace only (no old store).
func OpenTarget(ctx context.Context, o Stores) (*Target, func(), error) {
	st, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: o.CassandraHosts, Keyspace: o.Keyspace, Connection: o.CassandraConn, ReadOnly: o.ReadOnly})
	if err != nil {
		return nil, nil, fmt.Errorf("open cassandra (apply the schema first: shardmart cassandra schema apply): %w", err)
	}
	dst := NewTarget(st.Session())
	dst.Retention = o.EventRetention
	dst.Levels = st.Levels()
	return dst, func() { st.Close() }, nil
}

func openOld(ctx context.Context, o Stores) (MirrorSource, func(), error) {
	switch o.From {
	case FromSQLite:
		src, err := OpenSource(ctx, o.SQLitePath)
		if err != nil {
			return nil, nil, err
		}
		src.Retention = o.EventRetention
		return src, func() { src.Close() }, nil
	case FromMongo:
		if o.MongoURI == "" {
			return nil, nil, ErrNoMongoURI
		}
		src, err := OpenMongoSource(ctx, o.MongoURI, o.MongoDatabase)
		if err != nil {
			return nil, nil, err
		}
		src.Retention = o.EventRetention
		if err := src.EnsureIndexes(ctx); err != nil {
			src.Close()
			return nil, nil, err
		}
		return src, func() { src.Close() }, nil
	}
	return nil, nil, fmt.Errorf("migrate: old store %q: want %s or %s", o.From, FromSQLite, FromMongo)
}

// OpenOld opens the old store o.From read-only (a shop's dual write reads changed keys back).
func OpenOld(ctx context.Context, o Stores) (MirrorSource, func(), error) { return openOld(ctx, o) }

// OpenToMongo opens the old store read-only and the MongoDB target at o.MongoURI (the shop's
// database o.MongoDatabase), for the families of MongoFamilies.
func OpenToMongo(ctx context.Context, o Stores) (MirrorSource, *MongoTarget, func(), error) {
	if o.MongoURI == "" {
		return nil, nil, nil, ErrNoMongoURI
	}
	src, closeSrc, err := openOld(ctx, o)
	if err != nil {
		return nil, nil, nil, err
	}
	dst, closeDst, err := OpenMongoTarget(ctx, o.MongoURI, o.MongoDatabase)
	if err != nil {
		closeSrc()
		return nil, nil, nil, err
	}
	dst.Retention = o.EventRetention
	return src, dst, func() { closeDst(); closeSrc() }, nil
}
