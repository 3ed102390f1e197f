package shardtest

import (
	"context"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/eventually"
)

// ShardStats is one shard's share of a collection, from $collStats on that shard.
type ShardStats struct {
	Count   int64 // documents, orphans included
	Size    int64 // uncompressed data bytes, orphans included
	Orphans int64 // documents of ranges the shard no longer owns, awaiting deletion
}

// Owned is the shard's document count without orphans.
func (s ShardStats) Owned() int64 { return s.Count - s.Orphans }

// Stats reads $collStats of ns on every shard; a shard without the collection reports zeros.
func (r *Router) Stats(ctx context.Context, ns string) (map[string]ShardStats, error) {
	db, coll, ok := strings.Cut(ns, ".")
	if !ok {
		return nil, fmt.Errorf("shardtest: namespace %q: want db.collection", ns)
	}
	out := map[string]ShardStats{}
	for id, cl := range r.Shards {
		cur, err := cl.Database(db).Collection(coll).Aggregate(ctx, bson.A{
			bson.D{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}}}},
		})
		if err != nil {
			if isNamespaceNotFound(err) {
				out[id] = ShardStats{}
				continue
			}
			return nil, fmt.Errorf("shardtest: $collStats %s on %s: %w", ns, id, err)
		}
		var res []struct {
			StorageStats struct {
				Count         int64 `bson:"count"`
				Size          int64 `bson:"size"`
				NumOrphanDocs int64 `bson:"numOrphanDocs"`
			} `bson:"storageStats"`
		}
		if err := cur.All(ctx, &res); err != nil {
			return nil, fmt.Errorf("shardtest: $collStats %s on %s: %w", ns, id, err)
		}
		var st ShardStats
		for _, x := range res {
			st.Count += x.StorageStats.Count
			st.Size += x.StorageStats.Size
			st.Orphans += x.StorageStats.NumOrphanDocs
		}
		out[id] = st
	}
	return out, nil
}

// BalancerCompliance is _configsvrBalancerCollectionStatus's answer for one collection.
type BalancerCompliance struct {
	Compliant bool   `bson:"balancerCompliant"`
	Violation string `bson:"firstComplianceViolation"` // chunksImbalance, zoneViolation, …
}

// Compliance asks the config server whether the balancer considers ns balanced and within
// its zones (what balancerCollectionStatus answers through mongos).
func (r *Router) Compliance(ctx context.Context, ns string) (BalancerCompliance, error) {
	var c BalancerCompliance
	raw, err := run(ctx, r.Config, "admin", bson.D{{Key: "_configsvrBalancerCollectionStatus", Value: ns}})
	if err != nil {
		return c, err
	}
	if err := bson.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("shardtest: decode balancerCollectionStatus: %w", err)
	}
	return c, nil
}

// WaitSettled waits until the balancer reports ns compliant (balanced and within its zones)
// and no shard holds orphans of it any more; it returns the last compliance answer and stats.
// The balancer must be on for an unbalanced ns to settle.
func (r *Router) WaitSettled(ctx context.Context, ns string) (c BalancerCompliance, st map[string]ShardStats, err error) {
	err = eventually.Until(ctx, func() error {
		var err error
		if c, err = r.Compliance(ctx, ns); err != nil {
			return eventually.Stop(err)
		}
		if !c.Compliant {
			return fmt.Errorf("not compliant (violation %q)", c.Violation)
		}
		st, err = r.noOrphans(ctx, ns)
		return err
	})
	if err != nil {
		return c, st, fmt.Errorf("shardtest: %s not settled: %w", ns, err)
	}
	return c, st, nil
}

// WaitNoOrphans waits until no shard holds orphaned documents of ns and returns the stats.
func (r *Router) WaitNoOrphans(ctx context.Context, ns string) (st map[string]ShardStats, err error) {
	err = eventually.Until(ctx, func() error {
		var err error
		st, err = r.noOrphans(ctx, ns)
		return err
	})
	if err != nil {
		return st, fmt.Errorf("shardtest: %s: %w", ns, err)
	}
	return st, nil
}

// noOrphans returns ns's stats, and an error while a shard holds orphans of it (one that
// stops the wait when the stats cannot be read).
func (r *Router) noOrphans(ctx context.Context, ns string) (map[string]ShardStats, error) {
	st, err := r.Stats(ctx, ns)
	if err != nil {
		return nil, eventually.Stop(err)
	}
	orphans := int64(0)
	for _, s := range st {
		orphans += s.Orphans
	}
	if orphans > 0 {
		return st, fmt.Errorf("%d orphans left", orphans)
	}
	return st, nil
}
