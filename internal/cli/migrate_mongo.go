package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/placement"
)

// migrationTarget is the new store as the migrate verbs use it: Cassandra (migrate.Target) or
// MongoDB (migrate.MongoTarget: sessions, carts, history and events with dual writes).
type migrationTarget interface {
	migrate.Sink
	migrate.Scanner
	States(ctx context.Context) (map[migrate.Family]migrate.State, error)
	BeginCopy(ctx context.Context, f migrate.Family, source, run string, offline bool) (migrate.CopyStart, error)
	FinishCopy(ctx context.Context, st migrate.State) error
	MarkVerified(ctx context.Context, f migrate.Family, rows int64) (bool, error)
	Cutover(ctx context.Context, f migrate.Family) (migrate.State, error)
	Rollback(ctx context.Context, f migrate.Family) (migrate.State, error)
	WaitWriters(ctx context.Context, f migrate.Family, poll time.Duration, want ...migrate.Phase) ([]migrate.Writer, error)
	Writers(ctx context.Context, f migrate.Family) ([]migrate.Writer, error)
	PlannedRanges(ctx context.Context, run string, f migrate.Family) (int, error)
	Repair(ctx context.Context, src migrate.MirrorSource, f migrate.Family, diffs []migrate.Diff) error
}

// migrateEnv is an open old store and new store.
type migrateEnv struct {
	Src   migrate.MirrorSource
	Dst   migrationTarget
	Close func()
}

// toMongo reports a migration into MongoDB.
func (o migrateStores) toMongo() bool { return o.To == placement.Mongo }

// targetName is the new store, for messages.
func (o migrateStores) targetName() string {
	if o.toMongo() {
		return "MongoDB"
	}
	return "Cassandra"
}

// openMongo opens the embedded store and the MongoDB target (--mongo-uri, --mongo-db) for
// fams, which must move to MongoDB with dual writes.
func (o migrateStores) openMongo(ctx context.Context, fams []migrate.Family) (*migrateEnv, []migrate.Family, error) {
	if o.From != migrate.FromSQLite {
		return nil, nil, fmt.Errorf("--to mongo moves the embedded store (--from sqlite), not --from %s", o.From)
	}
	if o.Families == "" || o.Families == "all" {
		fams = migrate.MongoFamilies
	}
	for _, f := range fams {
		if !isMongoFamily(f) {
			return nil, nil, fmt.Errorf("--to mongo --family %s: this command moves %v with dual writes", f, migrate.MongoFamilies)
		}
	}
	stores, err := o.locate()
	if err != nil {
		return nil, nil, err
	}
	src, dst, closeAll, err := migrate.OpenToMongo(ctx, stores)
	if errors.Is(err, migrate.ErrNoMongoURI) {
		return nil, nil, errors.New("--to mongo needs --mongo-uri (a replica set or a mongos) and --mongo-db")
	}
	if err != nil {
		return nil, nil, err
	}
	return &migrateEnv{Src: src, Dst: dst, Close: closeAll}, fams, nil
}

func isMongoFamily(f migrate.Family) bool {
	for _, m := range migrate.MongoFamilies {
		if m == f {
			return true
		}
	}
	return false
}

// statusTarget opens the new store alone (read only) and names the families it tracks.
func (o migrateStores) statusTarget(ctx context.Context) (migrationTarget, []migrate.Family, func(), error) {
	stores, err := o.locate()
	if err != nil {
		return nil, nil, nil, err
	}
	if o.toMongo() {
		if stores.MongoURI == "" {
			return nil, nil, nil, errors.New("--to mongo needs --mongo-uri and --mongo-db")
		}
		dst, closeDst, err := migrate.OpenMongoTarget(ctx, stores.MongoURI, stores.MongoDatabase)
		return dst, migrate.MongoFamilies, closeDst, err
	}
	stores.ReadOnly = true
	dst, closeDst, err := migrate.OpenTarget(ctx, stores)
	return dst, migrate.Families, closeDst, err
}
