package shardtest

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Aggregate runs pipeline on db.coll where mongos would: on every shard holding the
// collection, concatenating the answers (what mongos returns for $collStats, one document
// per shard). A pipeline starting with $sample {size: n} draws from each shard in proportion
// to the documents it owns and returns n documents in all, as mongos merges shards' samples
// weighted by their sizes. A collection on no shard answers the shards' NamespaceNotFound.
func (r *Router) Aggregate(ctx context.Context, db, coll string, pipeline bson.A) ([]bson.Raw, error) {
	if n, ok := sampleSize(pipeline); ok {
		return r.sample(ctx, db, coll, n, pipeline)
	}
	var out []bson.Raw
	var notFound error
	for _, id := range r.ShardIDs() {
		res, err := r.aggregateOn(ctx, id, db, coll, pipeline)
		if isNamespaceNotFound(err) {
			notFound = err
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	if out == nil && notFound != nil {
		return nil, notFound
	}
	return out, nil
}

func (r *Router) aggregateOn(ctx context.Context, shard, db, coll string, pipeline bson.A) ([]bson.Raw, error) {
	cur, err := r.Shards[shard].Database(db).Collection(coll).Aggregate(ctx, pipeline)
	if err != nil {
		return nil, fmt.Errorf("aggregate %s.%s on %s: %w", db, coll, shard, err)
	}
	var out []bson.Raw
	for cur.Next(ctx) {
		out = append(out, slices.Clone(cur.Current))
	}
	if err := cur.Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("aggregate %s.%s on %s: %w", db, coll, shard, err), cur.Close(ctx))
	}
	return out, cur.Close(ctx)
}

// sampleSize is n when pipeline starts with {$sample: {size: n}}.
func sampleSize(pipeline bson.A) (int64, bool) {
	if len(pipeline) == 0 {
		return 0, false
	}
	st, ok := pipeline[0].(bson.D)
	if !ok || len(st) != 1 || st[0].Key != "$sample" {
		return 0, false
	}
	spec, ok := st[0].Value.(bson.D)
	if !ok {
		return 0, false
	}
	for _, e := range spec {
		if e.Key == "size" {
			switch v := e.Value.(type) {
			case int32:
				return int64(v), true
			case int64:
				return v, true
			case int:
				return int64(v), true
			}
		}
	}
	return 0, false
}

// sample merges the shards' own $sample answers the way mongos does: every document of the
// result comes from a shard drawn at random in proportion to the documents it owns, so the
// result is a random sample of the whole collection (not one stratified by shard, which
// would hide the sampling error mongos's answer has).
func (r *Router) sample(ctx context.Context, db, coll string, n int64, pipeline bson.A) ([]bson.Raw, error) {
	st, err := r.Stats(ctx, db+"."+coll)
	if err != nil {
		return nil, err
	}
	ids := r.ShardIDs()
	var total int64
	for _, id := range ids {
		total += st[id].Owned()
	}
	if total == 0 {
		return r.aggregateOn(ctx, ids[0], db, coll, pipeline)
	}
	per := map[string][]bson.Raw{}
	owned := map[string]int64{}
	for _, id := range ids {
		if owned[id] = st[id].Owned(); owned[id] <= 0 {
			continue
		}
		if per[id], err = r.aggregateOn(ctx, id, db, coll, pipeline); err != nil {
			return nil, err
		}
	}
	// Draw without replacement: a shard's weight is the documents it owns not yet drawn.
	var out []bson.Raw
	for left := total; int64(len(out)) < n && left > 0; left-- {
		x := r.int64N(left)
		for _, id := range ids {
			if owned[id] <= 0 {
				continue
			}
			if x < owned[id] {
				owned[id]--
				if len(per[id]) > 0 {
					out = append(out, per[id][0])
					per[id] = per[id][1:]
				}
				break
			}
			x -= owned[id]
		}
	}
	return out, nil
}
