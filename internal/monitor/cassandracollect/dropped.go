package cassandracollect

import (
	"context"
	"encoding/json"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
)

var droppedDesc = prometheus.NewDesc("shardmart_cassandra_dropped_messages_total",
	"messages the node dropped since it started, per verb (nodetool tpstats)", []string{"node", "verb"}, nil)

// droppedCollector reads `nodetool tpstats -F json`: 5.0.8 keeps dropped messages per verb
// in JMX only (no system_views table has them; internode_inbound/outbound count expired
// messages per peer, not per verb). It runs only when Options.Nodetool is set, and only for
// nodes that answer CQL, so a down node costs no nodetool JVM.
type droppedCollector struct {
	nodes    []*node
	nodetool NodetoolFunc
}

func (c *droppedCollector) Name() string { return "cassandra_dropped" }

func (c *droppedCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	return forEachNode(ctx, c.nodes, func(ctx context.Context, n *node, _ *gocql.Session) error {
		out, err := c.nodetool(ctx, n.label, "tpstats", "-F", "json")
		if err != nil {
			return fmt.Errorf("nodetool tpstats: %w", err)
		}
		dropped, err := parseDropped([]byte(out))
		if err != nil {
			return err
		}
		for verb, v := range dropped {
			ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, v, n.label, verb)
		}
		return nil
	})
}

// parseDropped takes the DroppedMessage object of `nodetool tpstats -F json`.
func parseDropped(out []byte) (map[string]float64, error) {
	var doc struct {
		DroppedMessage map[string]float64 `json:"DroppedMessage"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("parse nodetool tpstats json: %w", err)
	}
	if doc.DroppedMessage == nil {
		return nil, fmt.Errorf("nodetool tpstats json has no DroppedMessage object")
	}
	return doc.DroppedMessage, nil
}
