package cassandrastore

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
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
func statementName(stmt string) string { return infoOf(stmt).name }

// stmtInfo is what the client layer reads from a statement's text: its name and whether it is
// a lightweight transaction.
type stmtInfo struct {
	name string
	lwt  bool
}

// stmtInfos caches stmtInfo by statement text. The store's statements are a small fixed set,
// and each attempt needs the name several times (speculative delay, metric, span, log): read
// once per text instead of two or three times per attempt. Bounded, in case a caller builds
// statement texts with values in them.
var (
	stmtInfos    sync.Map // string -> *stmtInfo
	stmtInfosLen atomic.Int32
)

const maxStmtInfos = 4096

func infoOf(stmt string) *stmtInfo {
	if v, ok := stmtInfos.Load(stmt); ok {
		return v.(*stmtInfo)
	}
	in := &stmtInfo{name: tracing.StatementName(stmt), lwt: tracing.IsConditional(stmt)}
	if stmtInfosLen.Load() < maxStmtInfos {
		if v, loaded := stmtInfos.LoadOrStore(stmt, in); loaded {
			return v.(*stmtInfo)
		}
		stmtInfosLen.Add(1)
	}
	return in
}

// anyLWT reports whether a batch holds a lightweight transaction.
func anyLWT(stmts []string) bool {
	return slices.ContainsFunc(stmts, func(s string) bool { return infoOf(s).lwt })
}
