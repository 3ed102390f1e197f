package placement

import (
	"context"

	"github.com/shardmart/shardmart/internal/store/sqlite"
)

func openSQLite(ctx context.Context, o Options) (backend, error) {
	return sqlite.Open(ctx, o.SQLitePath)
}
