package placement

import (
	"context"

	"github.com/shardmart/shardmart/internal/store/sqlite"
)

func openSQLite(ctx context.Context, o Options) (backend, error) {
	db, err := sqlite.Open(ctx, o.SQLitePath)
	if err != nil {
		return nil, err
	}
	db.Observe = o.Observe
	return db, nil
}
