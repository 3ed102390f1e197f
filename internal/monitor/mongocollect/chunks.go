package mongocollect

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
)

var chunksDesc = prometheus.NewDesc("shardmart_mongo_collection_chunks",
	"chunks of the collection owned by the shard (config.chunks; a secondary signal since 6.0.3)",
	[]string{"namespace", "shard"}, nil)

// chunksCollector counts config.chunks per collection (by uuid, as chunks are keyed since 5.0)
// and shard. It reads the cluster entry only, so a shard that is down keeps its counts; every
// shard gets a series, 0 included, so "the mean of the other shards" has all its terms.
type chunksCollector struct{ c *Cluster }

func (chunksCollector) Name() string { return "mongo_chunks" }

func (cc chunksCollector) updateView(ctx context.Context, v *view, ch chan<- prometheus.Metric) error {
	cur, err := cc.c.config.Database("config").Collection("chunks").Aggregate(ctx, bson.A{
		bson.D{{Key: "$group", Value: bson.D{
			{Key: "_id", Value: bson.D{{Key: "uuid", Value: "$uuid"}, {Key: "shard", Value: "$shard"}}},
			{Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}},
		}}},
	})
	var groups []struct {
		ID struct {
			UUID  bson.RawValue `bson:"uuid"`
			Shard string        `bson:"shard"`
		} `bson:"_id"`
		N int64 `bson:"n"`
	}
	if err == nil {
		err = cur.All(ctx, &groups)
	}
	if err != nil {
		return fmt.Errorf("mongocollect: count config.chunks: %w", err)
	}
	counts := map[[2]string]int64{}
	for _, g := range groups {
		_, uuid, _ := g.ID.UUID.BinaryOK()
		if ns, ok := v.collections[string(uuid)]; ok {
			counts[[2]string{ns, g.ID.Shard}] = g.N
		}
	}
	for _, ns := range v.namespaces() {
		for _, sh := range v.shards {
			ch <- prometheus.MustNewConstMetric(chunksDesc, prometheus.GaugeValue, float64(counts[[2]string{ns, sh.id}]), ns, sh.id)
		}
	}
	return nil
}
