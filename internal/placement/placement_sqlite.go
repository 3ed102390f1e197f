package placement

import (
	"context"

	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// openSQLite reports no statement metric (Options.ObserveStatement): SQLite runs in process,
// so a repository operation's duration is its statements'. A traced request still gets a span
// per statement (Options.Tracer): the breakdown then shows which statements, and the time a
// request queues for the single writer shows between them.
func openSQLite(ctx context.Context, o Options) (backend, error) {
	if o.Tracer != nil {
		return sqlitestore.OpenTraced(ctx, o.SQLitePath, o.Tracer)
	}
	return sqlitestore.Open(ctx, o.SQLitePath)
}
