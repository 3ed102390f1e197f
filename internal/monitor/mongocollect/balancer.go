package mongocollect

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
)

var (
	balancerEnabledDesc = prometheus.NewDesc("shardmart_mongo_balancer_enabled",
		"1 if the balancer is enabled (balancerStatus mode is not off)", []string{"shard"}, nil)
	balancerRoundDesc = prometheus.NewDesc("shardmart_mongo_balancer_in_round",
		"1 while a balancing round runs (balancerStatus inBalancerRound)", []string{"shard"}, nil)
)

// balancerCollector reads the balancer's state from the cluster entry: balancerStatus through
// a mongos, its internal form _configsvrBalancerStatus on a config server (which refuses the
// public name). Cluster-wide series carry shard="config".
type balancerCollector struct{ c *Cluster }

func (balancerCollector) Name() string { return "mongo_balancer" }

func (b balancerCollector) updateView(ctx context.Context, v *view, ch chan<- prometheus.Metric) error {
	cmd := "_configsvrBalancerStatus"
	if v.mongos {
		cmd = "balancerStatus"
	}
	var st struct {
		Mode            string `bson:"mode"`
		InBalancerRound bool   `bson:"inBalancerRound"`
	}
	if err := b.c.config.Database("admin").RunCommand(ctx, bson.D{{Key: cmd, Value: 1}}).Decode(&st); err != nil {
		return fmt.Errorf("mongocollect: %s: %w", cmd, err)
	}
	ch <- prometheus.MustNewConstMetric(balancerEnabledDesc, prometheus.GaugeValue, boolValue(st.Mode != "off"), "config")
	ch <- prometheus.MustNewConstMetric(balancerRoundDesc, prometheus.GaugeValue, boolValue(st.InBalancerRound), "config")
	return nil
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
