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

// sample gives each shard a share of n proportional to the documents it owns (largest
// remainders), and takes that many from the shard's own $sample.
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
	want := make(map[string]int64, len(ids))
	type rem struct {
		id   string
		frac float64
	}
	var rems []rem
	given := int64(0)
	for _, id := range ids {
		exact := float64(n) * float64(st[id].Owned()) / float64(total)
		want[id] = int64(exact)
		given += want[id]
		rems = append(rems, rem{id, exact - float64(want[id])})
	}
	slices.SortStableFunc(rems, func(a, b rem) int {
		switch {
		case a.frac > b.frac:
			return -1
		case a.frac < b.frac:
			return 1
		}
		return 0
	})
	for i := 0; given < n && i < len(rems); i++ {
		want[rems[i].id]++
		given++
	}
	var out []bson.Raw
	for _, id := range ids {
		if want[id] == 0 {
			continue
		}
		p := slices.Clone(pipeline)
		p[0] = bson.D{{Key: "$sample", Value: bson.D{{Key: "size", Value: want[id]}}}}
		res, err := r.aggregateOn(ctx, id, db, coll, p)
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	return out, nil
}
