package placement

import (
	"context"

	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// openSQLite reports no statement detail (Options.ObserveStatement): SQLite runs in process,
// so a repository operation's duration is its statements' and nothing lies between them.
func openSQLite(ctx context.Context, o Options) (backend, error) {
	return sqlitestore.Open(ctx, o.SQLitePath)
}
