package mongocollect

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
)

var shardUpDesc = prometheus.NewDesc("shardmart_mongo_shard_up",
	"1 if the shard primary answered this scrape", []string{"shard"}, nil)

// shardsCollector reports each shard of config.shards as up or down. It fails only when the
// cluster entry (mongos or config server) does not answer: then nothing is known.
type shardsCollector struct{ c *Cluster }

func (shardsCollector) Name() string { return "mongo_shards" }

func (s shardsCollector) updateView(ctx context.Context, v *view, ch chan<- prometheus.Metric) error {
	for _, sh := range v.shards {
		up := 0.0
		if sh.up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(shardUpDesc, prometheus.GaugeValue, up, sh.id)
	}
	return nil
}
