package mongostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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
		collEvents: {{
			Name: "actor_newest", Key: sharding.Key{asc("user_id"), desc("_id")},
			Why: "EVT-1 without a type filter: one actor's day newest first (the spec's user_newest serves the typed query)",
		}},
		collOutbox: {{
			// Named as the shard key's index ({p: 1, seq: 1}) that `mongo apply` creates, so
			// the two are one index. Not unique: the partition counter already makes seq unique.
			Name: "p_1_seq_1", Key: sharding.Key{asc("p"), asc("seq")},
			Why: "the projector reads each outbox partition in seq order",
		}},
		collRateLimits: {{
			Name: "exp_ttl", Key: sharding.Key{asc("exp")}, TTL: true,
			Why: "a shared rate-limit counter is dropped once its bucket is full again (ratelimits.go)",
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
	collClaims, collUsers, collOutbox, collCounters, collCheckpoints, collRateLimits}

// SchemaReport says what EnsureSchema found and did.
type SchemaReport struct {
	Created []string // collections and indexes created
	// Missing are indexes not built because their collection already holds documents: a build
	// there can take long, so start-up does not wait for it; `shardmart mongo apply` builds them.
	Missing []string
	// Conflicts are indexes that exist with another key, name or options than this version
	// wants: they are left as they are (dropping or rebuilding is an operator's decision).
	Conflicts []string
}

// EnsureSchema creates missing collections and, comparing with listIndexes, the missing
// indexes of empty collections and the outbox counters. It never changes or drops an existing
// index and never starts a build on a collection that holds documents: those are reported.
// buildAll builds every missing index, also on collections with documents (`mongo apply`).
func (s *Store) EnsureSchema(ctx context.Context, buildAll bool) (SchemaReport, error) {
	var rep SchemaReport
	existing, err := s.db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return rep, fmt.Errorf("mongo: list collections: %w", err)
	}
	for _, c := range allCollections {
		if slices.Contains(existing, c) {
			continue
		}
		if err := s.db.CreateCollection(ctx, c); err != nil && !isNamespaceExists(err) {
			return rep, fmt.Errorf("mongo: create collection %s: %w", c, err)
		}
		rep.Created = append(rep.Created, "collection "+c)
	}
	wanted := schemaIndexes()
	for _, coll := range slices.Sorted(maps.Keys(wanted)) {
		have, err := s.listIndexes(ctx, coll)
		if err != nil {
			return rep, err
		}
		missing, conflicts := compareIndexes(coll, wanted[coll], have)
		rep.Conflicts = append(rep.Conflicts, conflicts...)
		if len(missing) == 0 {
			continue
		}
		if !buildAll {
			n, err := s.db.Collection(coll).EstimatedDocumentCount(ctx)
			if err != nil {
				return rep, fmt.Errorf("mongo: count %s: %w", coll, err)
			}
			if n > 0 {
				for _, ix := range missing {
					rep.Missing = append(rep.Missing, fmt.Sprintf("%s.%s %s (%d documents: run `shardmart mongo apply` to build it)", coll, ix.Name, ix.Key.Doc(), n))
				}
				continue
			}
		}
		if err := s.db.RunCommand(ctx, sharding.CreateIndexesCmd(coll, missing...)).Err(); err != nil {
			return rep, fmt.Errorf("mongo: create indexes on %s: %w", coll, err)
		}
		for _, ix := range missing {
			rep.Created = append(rep.Created, "index "+coll+"."+ix.Name)
		}
	}
	// The counters exist before the first transaction, so appendOutbox never upserts one
	// inside a transaction (two first transactions racing an upsert could fail on a duplicate key).
	var recorded struct {
		N int `bson:"n"`
	}
	err = s.coll(collCounters).FindOneAndUpdate(ctx, d(e("_id", partitionsDocID)),
		d(e("$setOnInsert", d(e("n", s.partitions)))),
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&recorded)
	if err != nil && !mongo.IsDuplicateKeyError(err) {
		return rep, fmt.Errorf("mongo: outbox partitions: %w", err)
	}
	if err == nil && recorded.N != s.partitions {
		return rep, fmt.Errorf("mongo: database %s was created with %d outbox partitions, opened with %d (the count is fixed for a database's life)",
			s.db.Name(), recorded.N, s.partitions)
	}
	for p := range int32(s.partitions) {
		_, err = s.coll(collCounters).UpdateOne(ctx, d(e("_id", counterID(p))),
			d(e("$setOnInsert", d(e("seq", int64(0))))), options.UpdateOne().SetUpsert(true))
		if err != nil && !mongo.IsDuplicateKeyError(err) {
			return rep, fmt.Errorf("mongo: create outbox counter %s: %w", counterID(p), err)
		}
	}
	return rep, nil
}

// indexSpec is one entry of listIndexes.
type indexSpec struct {
	Name               string   `bson:"name"`
	Key                bson.D   `bson:"key"`
	Unique             bool     `bson:"unique"`
	ExpireAfterSeconds *float64 `bson:"expireAfterSeconds"`
	Partial            bson.Raw `bson:"partialFilterExpression"`
}

func (s *Store) listIndexes(ctx context.Context, coll string) ([]indexSpec, error) {
	cur, err := s.db.Collection(coll).Indexes().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("mongo: list indexes of %s: %w", coll, err)
	}
	var have []indexSpec
	if err := cur.All(ctx, &have); err != nil {
		return nil, fmt.Errorf("mongo: list indexes of %s: %w", coll, err)
	}
	return have, nil
}

// compareIndexes returns the wanted indexes that are absent, and a line per index that exists
// in another shape: same name with another key or options, or the same key under another name
// (createIndexes would refuse both, and the service must not stop over it).
func compareIndexes(coll string, want []sharding.Index, have []indexSpec) (missing []sharding.Index, conflicts []string) {
	for _, w := range want {
		wkey := keyString(w.Key.Doc())
		found := false
		for _, h := range have {
			hkey := keyString(h.Key)
			switch {
			case h.Name == w.Name && hkey == wkey && sameOptions(w, h):
				found = true
			case h.Name == w.Name:
				found = true
				conflicts = append(conflicts, fmt.Sprintf("%s.%s exists as %s%s, this version wants %s%s", coll, w.Name, hkey, haveOptions(h), wkey, wantOptions(w)))
			case hkey == wkey:
				found = true
				conflicts = append(conflicts, fmt.Sprintf("%s.%s: the key %s is already indexed as %q%s (wanted name %q%s)", coll, w.Name, wkey, h.Name, haveOptions(h), w.Name, wantOptions(w)))
			}
			if found {
				break
			}
		}
		if !found {
			missing = append(missing, w)
		}
	}
	return missing, conflicts
}

// keyString renders an index key with numbers normalised (the server answers 1 as int32,
// int64 or double depending on how the index was created).
func keyString(k bson.D) string {
	parts := make([]string, len(k))
	for i, f := range k {
		v := fmt.Sprint(f.Value)
		switch n := f.Value.(type) {
		case int32:
			v = strconv.Itoa(int(n))
		case int64:
			v = strconv.FormatInt(n, 10)
		case float64:
			v = strconv.FormatFloat(n, 'f', -1, 64)
		}
		parts[i] = f.Key + ":" + v
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func sameOptions(w sharding.Index, h indexSpec) bool {
	return wantOptions(w) == haveOptions(h)
}

func wantOptions(w sharding.Index) string {
	var b strings.Builder
	if w.Unique {
		b.WriteString(" unique")
	}
	if w.TTL {
		fmt.Fprintf(&b, " expireAfterSeconds=%d", int64(w.ExpireAfter/time.Second))
	}
	if w.Partial != nil {
		raw, _ := bson.Marshal(w.Partial)
		b.WriteString(" partial=" + bson.Raw(raw).String())
	}
	return b.String()
}

func haveOptions(h indexSpec) string {
	var b strings.Builder
	if h.Unique {
		b.WriteString(" unique")
	}
	if h.ExpireAfterSeconds != nil {
		fmt.Fprintf(&b, " expireAfterSeconds=%d", int64(*h.ExpireAfterSeconds))
	}
	if h.Partial != nil {
		b.WriteString(" partial=" + h.Partial.String())
	}
	return b.String()
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
