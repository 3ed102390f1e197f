package cassandracollect

import (
	"context"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
)

var hintsDesc = prometheus.NewDesc("shardmart_cassandra_pending_hints",
	"hint files this node holds for other nodes (system_views.pending_hints)", []string{"node"}, nil)

// hintsCollector sums system_views.pending_hints.files over the target hosts. 5.0.8 counts
// pending hints only as files (here and in nodetool listpendinghints), never as hints, so
// the series is a file count: 0 means nothing to replay, growth means a replica is missing.
type hintsCollector struct{ nodes []*node }

func (c *hintsCollector) Name() string { return "cassandra_hints" }

func (c *hintsCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	return forEachNode(ctx, c.nodes, func(ctx context.Context, n *node, s *gocql.Session) error {
		iter := s.Query("SELECT files FROM system_views.pending_hints").IterContext(ctx)
		var total, files int
		for iter.Scan(&files) {
			total += files
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("read system_views.pending_hints: %w", err)
		}
		ch <- prometheus.MustNewConstMetric(hintsDesc, prometheus.GaugeValue, float64(total), n.label)
		return nil
	})
}
