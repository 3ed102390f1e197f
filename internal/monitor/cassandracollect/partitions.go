package cassandracollect

import (
	"context"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
)

const mebibyte = 1 << 20

var partitionDesc = prometheus.NewDesc("shardmart_cassandra_max_partition_bytes",
	"largest partition of the table on the node (system_views.max_partition_size, flushed SSTables only, 1 MiB resolution)",
	[]string{"node", "keyspace", "table"}, nil)

// partitionCollector reads system_views.max_partition_size: the largest partition among the
// table's SSTables on this node, in whole mebibytes rounded up (so never below the true
// size). Data still in the memtable is not counted until it is flushed. Tables at 0 are
// left out: with hundreds of system tables they would only be noise.
type partitionCollector struct{ nodes []*node }

func (c *partitionCollector) Name() string { return "cassandra_partitions" }

func (c *partitionCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	return forEachNode(ctx, c.nodes, func(ctx context.Context, n *node, s *gocql.Session) error {
		iter := s.Query("SELECT keyspace_name, table_name, mebibytes FROM system_views.max_partition_size").IterContext(ctx)
		var ks, table string
		var mib int64
		for iter.Scan(&ks, &table, &mib) {
			if mib > 0 {
				ch <- prometheus.MustNewConstMetric(partitionDesc, prometheus.GaugeValue, float64(mib*mebibyte), n.label, ks, table)
			}
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("read system_views.max_partition_size: %w", err)
		}
		return nil
	})
}
