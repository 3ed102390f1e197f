package cassandracollect

import (
	"context"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	latencyDesc = prometheus.NewDesc("shardmart_cassandra_table_latency_seconds",
		"local read/write latency quantile of the table on the node (system_views.local_read_latency, local_write_latency)",
		[]string{"node", "keyspace", "table", "op", "quantile"}, nil)
	// The maximum is not a quantile, so it has its own name instead of a quantile="max" label.
	latencyMaxDesc = prometheus.NewDesc("shardmart_cassandra_table_latency_max_seconds",
		"local read/write latency maximum of the table on the node (system_views.local_read_latency, local_write_latency)",
		[]string{"node", "keyspace", "table", "op"}, nil)
)

// latencyCollector reads the node-local latency tables. Despite their names, 5.0.8's
// p50th_ms, p99th_ms and max_ms hold seconds (the microsecond histogram times 1e-6, rounded
// to 3 decimals; checked against nodetool tablehistograms), so they are used unscaled, with
// 1 ms resolution. Tables never read or written on the node (count 0) are left out.
type latencyCollector struct{ nodes []*node }

func (c *latencyCollector) Name() string { return "cassandra_latency" }

func (c *latencyCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	return forEachNode(ctx, c.nodes, func(ctx context.Context, n *node, s *gocql.Session) error {
		for _, src := range []struct{ op, table string }{{"read", "local_read_latency"}, {"write", "local_write_latency"}} {
			iter := s.Query("SELECT keyspace_name, table_name, count, p50th_ms, p99th_ms, max_ms FROM system_views." + src.table).IterContext(ctx)
			var ks, table string
			var count int64
			var p50, p99, max float64
			for iter.Scan(&ks, &table, &count, &p50, &p99, &max) {
				if count == 0 {
					continue
				}
				for _, q := range []struct {
					quantile string
					v        float64
				}{{"0.5", p50}, {"0.99", p99}} {
					ch <- prometheus.MustNewConstMetric(latencyDesc, prometheus.GaugeValue, q.v, n.label, ks, table, src.op, q.quantile)
				}
				ch <- prometheus.MustNewConstMetric(latencyMaxDesc, prometheus.GaugeValue, max, n.label, ks, table, src.op)
			}
			if err := iter.Close(); err != nil {
				return fmt.Errorf("read system_views.%s: %w", src.table, err)
			}
		}
		return nil
	})
}
