package placement

import (
	"context"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/projection"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// cassandraBackend serves carts, sessions, events, history and the catalog read model; it
// cannot hold orders (Validate refuses that placement).
type cassandraBackend struct{ st *cassandrastore.Store }

// openCassandra connects to o.CassandraHosts and checks that `shardmart cassandra schema
// apply` has brought o.CassandraKeyspace to the current schema version.
func openCassandra(ctx context.Context, o Options) (backend, error) {
	st, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: o.CassandraHosts, Keyspace: o.CassandraKeyspace, Connection: o.CassandraConn,
		ObserveStatement: o.statements(Cassandra), Tracer: o.Tracer,
		EventRetention: o.EventRetention, Metrics: o.CassandraMetrics, NumConns: o.CassandraNumConns})
	if err != nil {
		return nil, err
	}
	return cassandraBackend{st: st}, nil
}

func (b cassandraBackend) Close() error                        { return b.st.Close() }
func (b cassandraBackend) Ping(ctx context.Context) error      { return b.st.Ping(ctx) }
func (b cassandraBackend) Carts() cart.Repository              { return b.st.Carts() }
func (b cassandraBackend) Sessions() session.Repository        { return b.st.Sessions() }
func (b cassandraBackend) Events() event.Repository            { return b.st.Events() }
func (b cassandraBackend) History() history.Repository         { return b.st.History() }
func (b cassandraBackend) Catalog() CatalogReader              { return b.st.Catalog() }
func (b cassandraBackend) CatalogSink() projection.CatalogSink { return b.st.Catalog() }
