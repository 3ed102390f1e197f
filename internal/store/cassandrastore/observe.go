package cassandrastore

import (
	"context"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/tracing"
)

// observer reports each statement's latency to the statement metric, named "<verb>.<table>"
// (a small, fixed set: one per statement shape of the schema).
type observer func(statement string, d time.Duration, err error)

func (o observer) ObserveQuery(_ context.Context, q gocql.ObservedQuery) {
	o(statementName(q.Statement), q.End.Sub(q.Start), q.Err)
}

func (o observer) ObserveBatch(_ context.Context, b gocql.ObservedBatch) {
	o("batch", b.End.Sub(b.Start), b.Err)
}

// statementName names a CQL statement by its verb and table: "SELECT ... FROM user_carts" is
// "select.user_carts" (the embedded store names its SQL the same way).
func statementName(stmt string) string { return tracing.StatementName(stmt) }
