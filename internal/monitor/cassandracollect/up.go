package cassandracollect

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

var upDesc = prometheus.NewDesc("shardmart_cassandra_node_up",
	"1 if the node answered this scrape", []string{"node"}, nil)

// upCollector asks each node for system.local: a node that cannot be reached or does not
// answer is 0. It never fails: a down node is what it reports.
type upCollector struct{ nodes []*node }

func (c *upCollector) Name() string { return "cassandra_up" }

func (c *upCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() {
			up := 0.0
			if s, err := n.get(ctx); err == nil {
				var v string
				if err := s.Query("SELECT release_version FROM system.local").ScanContext(ctx, &v); err == nil {
					up = 1
				} else {
					n.logger.Debug("cassandra node did not answer", "node", n.label, "err", err)
					n.drop(s)
				}
			}
			ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, up, n.label)
		})
	}
	wg.Wait()
	return nil
}
