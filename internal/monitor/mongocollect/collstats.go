package mongocollect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

var (
	dataBytesDesc = prometheus.NewDesc("shardmart_mongo_collection_data_bytes",
		"uncompressed data of the collection on the shard, orphans excluded ($collStats storageStats.size × owned/count)",
		[]string{"namespace", "shard"}, nil)
	documentsDesc = prometheus.NewDesc("shardmart_mongo_collection_documents",
		"documents of the collection on the shard, orphans excluded (storageStats.count − numOrphanDocs)",
		[]string{"namespace", "shard"}, nil)
	orphansDesc = prometheus.NewDesc("shardmart_mongo_collection_orphan_documents",
		"documents of ranges the shard no longer owns, awaiting deletion (storageStats.numOrphanDocs)",
		[]string{"namespace", "shard"}, nil)
	collOpsDesc = prometheus.NewDesc("shardmart_mongo_collection_operations_total",
		"operations on the collection on the shard since the shard started ($collStats latencyStats.{reads,writes,commands}.ops): the per-collection write share",
		[]string{"namespace", "shard", "op"}, nil)
)

// collStatsCollector reads $collStats storageStats of every sharded collection on every shard
// that is up. Orphans (left by a chunk move until the range deleter runs) are subtracted, or a
// donor looks hot right after the balancer relieved it. A shard without the collection reports
// zeros: it holds none of it.
type collStatsCollector struct{ c *Cluster }

func (collStatsCollector) Name() string { return "mongo_collstats" }

// collStats is one shard's storage figures for one collection.
type collStats struct {
	Count, Size, Orphans int64
	Ops                  map[string]int64 // latencyStats ops by kind: reads, writes, commands
}

// owned is the data size and document count without orphans. storageStats has no size of the
// orphans alone, so they are taken at the collection's mean document size.
func (s collStats) owned() (bytes, docs float64) {
	docs = float64(s.Count - s.Orphans)
	if s.Count <= 0 || docs <= 0 {
		return 0, 0
	}
	return float64(s.Size) * docs / float64(s.Count), docs
}

func (cs collStatsCollector) updateView(ctx context.Context, v *view, ch chan<- prometheus.Metric) error {
	namespaces := v.namespaces()
	return onUpShards(ctx, cs.c.opts.Logger, v, func(ctx context.Context, s shard) error {
		var errs []error
		for _, ns := range namespaces {
			st, err := readCollStats(ctx, s.client, ns)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			bytes, docs := st.owned()
			ch <- prometheus.MustNewConstMetric(dataBytesDesc, prometheus.GaugeValue, bytes, ns, s.id)
			ch <- prometheus.MustNewConstMetric(documentsDesc, prometheus.GaugeValue, docs, ns, s.id)
			ch <- prometheus.MustNewConstMetric(orphansDesc, prometheus.GaugeValue, float64(st.Orphans), ns, s.id)
			for _, op := range []string{"reads", "writes", "commands"} {
				ch <- prometheus.MustNewConstMetric(collOpsDesc, prometheus.CounterValue, float64(st.Ops[op]), ns, s.id, op)
			}
		}
		return errors.Join(errs...)
	})
}

// codeNamespaceNotFound: the shard has no such collection (it never owned a chunk of it).
const codeNamespaceNotFound = 26

func readCollStats(ctx context.Context, cl *mongo.Client, ns string) (collStats, error) {
	var st collStats
	db, coll, _ := strings.Cut(ns, ".")
	cur, err := cl.Database(db).Collection(coll).Aggregate(ctx, bson.A{
		bson.D{{Key: "$collStats", Value: bson.D{{Key: "storageStats", Value: bson.D{}}, {Key: "latencyStats", Value: bson.D{}}}}},
	})
	var res []struct {
		StorageStats struct {
			Count         int64 `bson:"count"`
			Size          int64 `bson:"size"`
			NumOrphanDocs int64 `bson:"numOrphanDocs"`
		} `bson:"storageStats"`
		LatencyStats map[string]struct {
			Ops int64 `bson:"ops"`
		} `bson:"latencyStats"`
	}
	if err == nil {
		err = cur.All(ctx, &res)
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) && ce.Code == codeNamespaceNotFound {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("$collStats %s: %w", ns, err)
	}
	for _, r := range res { // one document per shard; more only through a mongos
		st.Count += r.StorageStats.Count
		st.Size += r.StorageStats.Size
		st.Orphans += r.StorageStats.NumOrphanDocs
		for op, l := range r.LatencyStats {
			if st.Ops == nil {
				st.Ops = map[string]int64{}
			}
			st.Ops[op] += l.Ops
		}
	}
	return st, nil
}
