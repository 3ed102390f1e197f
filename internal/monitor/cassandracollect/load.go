package cassandracollect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
)

var loadDesc = prometheus.NewDesc("shardmart_cassandra_load_bytes",
	"live SSTable bytes on the node, as gossiped (nodetool status Load; system_views.gossip_info)", []string{"node"}, nil)

// loadCollector reads the node's own LOAD from system_views.gossip_info: the live SSTable
// bytes that nodetool status shows, republished by the node every 60 s. The fresher
// system_views.disk_usage was rejected: 5.0.8 rounds every table up to a whole mebibyte,
// which on a node holding 134 KiB read 19 MiB, drowning the differences the hot-node alert
// looks for. A node that has not gossiped its load yet (just started) has no series.
type loadCollector struct{ nodes []*node }

func (c *loadCollector) Name() string { return "cassandra_load" }

func (c *loadCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	return forEachNode(ctx, c.nodes, func(ctx context.Context, n *node, s *gocql.Session) error {
		var addr net.IP
		var port int
		if err := s.Query("SELECT broadcast_address, broadcast_port FROM system.local").ScanContext(ctx, &addr, &port); err != nil {
			return fmt.Errorf("read system.local: %w", err)
		}
		var load *string
		err := s.Query("SELECT load FROM system_views.gossip_info WHERE address = ? AND port = ?", addr, port).ScanContext(ctx, &load)
		if errors.Is(err, gocql.ErrNotFound) || (err == nil && load == nil) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read system_views.gossip_info: %w", err)
		}
		v, err := strconv.ParseFloat(*load, 64)
		if err != nil {
			return fmt.Errorf("gossiped load %q: %w", *load, err)
		}
		ch <- prometheus.MustNewConstMetric(loadDesc, prometheus.GaugeValue, v, n.label)
		return nil
	})
}
