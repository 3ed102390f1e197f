package mongocollect

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
)

var longOpsDesc = prometheus.NewDesc("shardmart_mongo_long_operations",
	"operations running for more than 1 s on the shard primary, by namespace ($currentOp)",
	[]string{"namespace", "shard"}, nil)

// longOpSeconds: an operation running longer than this counts as long (secs_running > 1).
const longOpSeconds = 1

// currentOpCollector counts the long-running operations on each shard primary that is up, by
// namespace. Every sharded collection gets a series (0 included) so shards compare; other
// namespaces appear only while they have a long operation. Operations without a namespace
// (internal threads) are left out.
type currentOpCollector struct{ c *Cluster }

func (currentOpCollector) Name() string { return "mongo_currentop" }

func (co currentOpCollector) updateView(ctx context.Context, v *view, ch chan<- prometheus.Metric) error {
	namespaces := v.namespaces()
	return onUpShards(ctx, co.c.opts.Logger, v, func(ctx context.Context, s shard) error {
		cur, err := s.client.Database("admin").Aggregate(ctx, bson.A{
			bson.D{{Key: "$currentOp", Value: bson.D{{Key: "allUsers", Value: true}, {Key: "idleConnections", Value: false}}}},
			bson.D{{Key: "$match", Value: bson.D{{Key: "secs_running", Value: bson.D{{Key: "$gt", Value: longOpSeconds}}}, {Key: "ns", Value: bson.D{{Key: "$nin", Value: bson.A{nil, ""}}}}}}},
			bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$ns"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
		})
		var groups []struct {
			NS string `bson:"_id"`
			N  int64  `bson:"n"`
		}
		if err == nil {
			err = cur.All(ctx, &groups)
		}
		if err != nil {
			return fmt.Errorf("$currentOp: %w", err)
		}
		counts := map[string]int64{}
		for _, ns := range namespaces {
			counts[ns] = 0
		}
		for _, g := range groups {
			counts[g.NS] = g.N
		}
		for ns, n := range counts {
			ch <- prometheus.MustNewConstMetric(longOpsDesc, prometheus.GaugeValue, float64(n), ns, s.id)
		}
		return nil
	})
}
