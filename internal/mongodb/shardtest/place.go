package shardtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/sharding"
)

// Chunk is one config.chunks document.
type Chunk struct {
	Min   bson.D `bson:"min"`
	Max   bson.D `bson:"max"`
	Shard string `bson:"shard"`
	Jumbo bool   `bson:"jumbo"`
	// Lastmod is the chunk's version (major = migrations, minor = splits and merges).
	Lastmod bson.Timestamp `bson:"lastmod"`
}

// CollectionInfo is what the config server knows of a collection: its shard key and chunks
// in key order, or Sharded false.
type CollectionInfo struct {
	NS      string
	Sharded bool
	Key     bson.D
	Chunks  []Chunk
	// Epoch and Timestamp name the collection's incarnation, part of every shard version.
	Epoch     bson.ObjectID
	Timestamp bson.Timestamp
}

// Owners lists the shards that own chunks, the owner of the first chunk first.
func (c CollectionInfo) Owners() []string {
	var out []string
	for _, ch := range c.Chunks {
		if !slices.Contains(out, ch.Shard) {
			out = append(out, ch.Shard)
		}
	}
	return out
}

// ChunksOn counts the chunks each shard owns.
func (c CollectionInfo) ChunksOn() map[string]int {
	out := map[string]int{}
	for _, ch := range c.Chunks {
		out[ch.Shard]++
	}
	return out
}

// Owner is the shard whose chunk holds key (a full shard-key document, hashed fields as hashes).
func (c CollectionInfo) Owner(key bson.D) (string, error) {
	i, _ := slices.BinarySearchFunc(c.Chunks, key, func(ch Chunk, k bson.D) int { return sharding.CompareKeys(ch.Min, k) })
	// i is the first chunk with min > key, or the one with min == key.
	if i == len(c.Chunks) || sharding.CompareKeys(c.Chunks[i].Min, key) > 0 {
		i--
	}
	if i < 0 || sharding.CompareKeys(key, c.Chunks[i].Max) >= 0 {
		return "", fmt.Errorf("shardtest: no chunk of %s holds %s", c.NS, sharding.ShellValue(key))
	}
	return c.Chunks[i].Shard, nil
}

// Collection reads ns's entry in config.collections and its chunks (keyed by uuid since 5.0).
func (r *Router) Collection(ctx context.Context, ns string) (CollectionInfo, error) {
	info := CollectionInfo{NS: ns}
	cfg := r.Config.Database("config")
	var entry struct {
		Key          bson.D         `bson:"key"`
		UUID         bson.RawValue  `bson:"uuid"`
		Unsplittable bool           `bson:"unsplittable"`
		Epoch        bson.ObjectID  `bson:"lastmodEpoch"`
		Timestamp    bson.Timestamp `bson:"timestamp"`
	}
	err := cfg.Collection("collections").FindOne(ctx, bson.D{{Key: "_id", Value: ns}}).Decode(&entry)
	if errors.Is(err, mongo.ErrNoDocuments) || err == nil && entry.Unsplittable {
		return info, nil
	}
	if err != nil {
		return info, fmt.Errorf("shardtest: read config.collections %s: %w", ns, err)
	}
	info.Sharded, info.Key, info.Epoch, info.Timestamp = true, entry.Key, entry.Epoch, entry.Timestamp
	cur, err := cfg.Collection("chunks").Find(ctx, bson.D{{Key: "uuid", Value: entry.UUID}})
	if err != nil {
		return info, fmt.Errorf("shardtest: read config.chunks %s: %w", ns, err)
	}
	if err := cur.All(ctx, &info.Chunks); err != nil {
		return info, fmt.Errorf("shardtest: read config.chunks %s: %w", ns, err)
	}
	slices.SortFunc(info.Chunks, func(a, b Chunk) int { return sharding.CompareKeys(a.Min, b.Min) })
	return info, nil
}

// Place inserts docs into ns on the shard that owns each one's chunk, as mongos routes an
// insert (an unsharded collection's documents go to its database's primary shard). It returns
// how many documents went to each shard. Hashed key fields are hashed by the server
// ($toHashedIndexKey); only top-level key fields are supported.
func (r *Router) Place(ctx context.Context, ns string, docs []bson.D) (map[string]int, error) {
	db, coll, ok := strings.Cut(ns, ".")
	if !ok {
		return nil, fmt.Errorf("shardtest: namespace %q: want db.collection", ns)
	}
	info, err := r.Collection(ctx, ns)
	if err != nil {
		return nil, err
	}
	byShard := map[string][]any{}
	if !info.Sharded {
		d, err := r.database(ctx, db)
		if err != nil {
			return nil, err
		}
		for _, doc := range docs {
			byShard[d.Primary] = append(byShard[d.Primary], doc)
		}
	} else {
		keys, err := r.shardKeys(ctx, info.Key, docs)
		if err != nil {
			return nil, err
		}
		for i, k := range keys {
			sh, err := info.Owner(k)
			if err != nil {
				return nil, err
			}
			byShard[sh] = append(byShard[sh], docs[i])
		}
	}
	counts := map[string]int{}
	for sh, batch := range byShard {
		cl, ok := r.Shards[sh]
		if !ok {
			return counts, fmt.Errorf("shardtest: chunk owner %q is not in this cluster", sh)
		}
		if _, err := cl.Database(db).Collection(coll).InsertMany(ctx, batch, options.InsertMany().SetOrdered(false)); err != nil {
			return counts, fmt.Errorf("shardtest: insert %d documents on %s: %w", len(batch), sh, err)
		}
		counts[sh] = len(batch)
	}
	return counts, nil
}

// shardKeys extracts each document's shard key; hashed fields are replaced by the server's hash.
func (r *Router) shardKeys(ctx context.Context, pattern bson.D, docs []bson.D) ([]bson.D, error) {
	keys := make([]bson.D, len(docs))
	for i, doc := range docs {
		k := make(bson.D, len(pattern))
		for j, f := range pattern {
			if strings.Contains(f.Key, ".") {
				return nil, fmt.Errorf("shardtest: dotted shard-key field %q is not supported", f.Key)
			}
			v, _ := lookup(doc, f.Key) // missing is null, as the server treats it
			k[j] = bson.E{Key: f.Key, Value: v}
		}
		keys[i] = k
	}
	for j, f := range pattern {
		if f.Value != "hashed" {
			continue
		}
		vals := make([]any, len(keys))
		for i, k := range keys {
			vals[i] = k[j].Value
		}
		hashes, err := r.Hash(ctx, vals)
		if err != nil {
			return nil, err
		}
		for i := range keys {
			keys[i][j].Value = hashes[i]
		}
	}
	return keys, nil
}

// Hash returns the server's hashed-index value ($toHashedIndexKey) of each value.
func (r *Router) Hash(ctx context.Context, vals []any) ([]int64, error) {
	const batch = 10_000
	out := make([]int64, 0, len(vals))
	for lo := 0; lo < len(vals); lo += batch {
		part := vals[lo:min(lo+batch, len(vals))]
		in := make(bson.A, len(part))
		for i, v := range part {
			in[i] = bson.D{{Key: "i", Value: int32(i)}, {Key: "v", Value: v}}
		}
		pipeline := bson.A{
			bson.D{{Key: "$documents", Value: in}},
			bson.D{{Key: "$project", Value: bson.D{{Key: "_id", Value: 0}, {Key: "i", Value: 1}, {Key: "h", Value: bson.D{{Key: "$toHashedIndexKey", Value: "$v"}}}}}},
		}
		cur, err := r.Config.Database("admin").Aggregate(ctx, pipeline)
		if err != nil {
			return nil, fmt.Errorf("shardtest: $toHashedIndexKey: %w", err)
		}
		var res []struct {
			I int32 `bson:"i"`
			H int64 `bson:"h"`
		}
		if err := cur.All(ctx, &res); err != nil {
			return nil, fmt.Errorf("shardtest: $toHashedIndexKey: %w", err)
		}
		if len(res) != len(part) {
			return nil, fmt.Errorf("shardtest: $toHashedIndexKey returned %d hashes for %d values", len(res), len(part))
		}
		hashes := make([]int64, len(part))
		for _, h := range res {
			hashes[h.I] = h.H
		}
		out = append(out, hashes...)
	}
	return out, nil
}
