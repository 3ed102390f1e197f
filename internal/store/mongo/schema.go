package mongo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/sharding"
)

// e and d keep command documents short and keyed (go vet refuses unkeyed bson.E literals).
func e(k string, v any) bson.E { return bson.E{Key: k, Value: v} }
func d(es ...bson.E) bson.D    { return bson.D(es) }

// ownIndexes are the indexes this package needs beyond those of the sharding spec
// (internal/sharding), which EnsureSchema creates too, under the spec's names, so that
// `shardmart mongo apply` and the repositories never disagree about an index.
func ownIndexes() map[string][]sharding.Index {
	asc := func(n string) sharding.KeyField { return sharding.KeyField{Name: n, Kind: sharding.Ascending} }
	desc := func(n string) sharding.KeyField { return sharding.KeyField{Name: n, Kind: sharding.Descending} }
	return map[string][]sharding.Index{
		collProducts: {{
			Name: "category_price_id", Key: sharding.Key{asc("category"), asc("price"), asc("_id")},
			Why: "PRD-2 pages sort by (price, _id): the spec's {category, price} cannot give that order without an in-memory sort",
		}},
		collEvents: {{
			Name: "actor_newest", Key: sharding.Key{asc("user_id"), desc("_id")},
			Why: "EVT-1 without a type filter: one actor's day newest first (the spec's user_newest serves the typed query)",
		}},
		collHistory: {{
			Name: "user_newest", Key: sharding.Key{asc("user_id"), desc("placed_at"), desc("_id")},
			Why: "ORD-2/HIS-1: a user's history newest first, _id (the order id) breaks ties",
		}},
	}
}

// allCollections must exist before any transaction touches them: a distributed transaction
// that writes to several shards cannot create a collection.
var allCollections = []string{collOrders, collProducts, collCarts, collSessions, collEvents, collHistory,
	collClaims, collUsers, collOutbox, collCounters, collCheckpoints}

// EnsureSchema creates every collection, the spec's and this package's indexes, and the outbox
// counter document. It is idempotent. It does not shard anything: `shardmart mongo apply` does.
func (s *Store) EnsureSchema(ctx context.Context) error {
	existing, err := s.db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return fmt.Errorf("mongo: list collections: %w", err)
	}
	for _, c := range allCollections {
		if slices.Contains(existing, c) {
			continue
		}
		if err := s.db.CreateCollection(ctx, c); err != nil && !isNamespaceExists(err) {
			return fmt.Errorf("mongo: create collection %s: %w", c, err)
		}
	}
	for coll, ixs := range schemaIndexes() {
		if err := s.db.RunCommand(ctx, sharding.CreateIndexesCmd(coll, ixs...)).Err(); err != nil {
			return fmt.Errorf("mongo: create indexes on %s: %w", coll, err)
		}
	}
	// The counter exists before the first transaction, so appendOutbox never upserts it
	// inside one (two first transactions racing an upsert could fail on a duplicate key).
	_, err = s.coll(collCounters).UpdateOne(ctx, d(e("_id", outboxCounterID)),
		d(e("$setOnInsert", d(e("seq", int64(0))))), options.UpdateOne().SetUpsert(true))
	if err != nil && !mongo.IsDuplicateKeyError(err) {
		return fmt.Errorf("mongo: create outbox counter: %w", err)
	}
	return nil
}

// schemaIndexes is every index EnsureSchema creates, per collection.
func schemaIndexes() map[string][]sharding.Index {
	out := ownIndexes()
	spec, err := sharding.NewSpec(sharding.Options{Now: time.Unix(0, 0)})
	if err != nil { // the default spec always builds; a failure is a programming error
		panic(fmt.Sprintf("mongo: default sharding spec: %v", err))
	}
	for _, c := range spec.Collections {
		if len(c.Indexes) > 0 { // createIndexes refuses an empty list (claims, users have none)
			out[c.Name] = append(slices.Clone(c.Indexes), out[c.Name]...)
		}
	}
	return out
}

const codeNamespaceExists = 48

func isNamespaceExists(err error) bool {
	var ce mongo.CommandError
	return errors.As(err, &ce) && ce.Code == codeNamespaceExists
}
