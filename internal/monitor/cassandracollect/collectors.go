package cassandracollect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// NodetoolFunc runs nodetool against the node whose CQL host is host and returns its
// standard output. nodetool speaks JMX, which Cassandra binds to localhost by default, so
// only a caller that can reach each node's JMX (the launcher, for its own clusters) sets it.
type NodetoolFunc func(ctx context.Context, host string, args ...string) (string, error)

// Options configure New.
type Options struct {
	Hosts   []string      // CQL addresses, host or host:port (default port 9042); one per node
	Timeout time.Duration // bounds each scrape and each node's connect; default 10 s
	Logger  *slog.Logger  // default: discard
	// Nodetool, if set, feeds shardmart_cassandra_dropped_messages_total: Cassandra 5.0.8
	// exposes dropped messages per verb over JMX only (nodetool tpstats), in no virtual table.
	Nodetool NodetoolFunc
	// Conn is the login and TLS each node's session uses (its local DC is not used: every node
	// is read on its own).
	Conn cassandrastore.Connection
}

// Updater is one collector: Update sends what it read at scrape time and returns an error
// only when the collector itself failed; a node that is down is node_up=0, not a failure.
type Updater interface {
	Name() string
	Update(ctx context.Context, ch chan<- prometheus.Metric) error
}

// Collectors is every Cassandra collector over one set of nodes.
type Collectors struct {
	nodes    []*node
	updaters []Updater
	timeout  time.Duration
	logger   *slog.Logger
}

// New prepares the collectors. It connects to nothing: a node that is down at start is a
// series (node_up=0) on every scrape until it answers, so the exporter can start first.
func New(ctx context.Context, o Options) (*Collectors, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(o.Hosts) == 0 {
		return nil, errors.New("cassandracollect: no hosts")
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Collectors{timeout: o.Timeout, logger: o.Logger}
	seen := map[string]bool{}
	for _, h := range o.Hosts {
		if seen[h] {
			return nil, fmt.Errorf("cassandracollect: host %s given twice", h)
		}
		seen[h] = true
		n, err := newNode(h, o.Timeout, o.Logger)
		if err != nil {
			return nil, fmt.Errorf("cassandracollect: %w", err)
		}
		n.conn = o.Conn
		c.nodes = append(c.nodes, n)
	}
	c.updaters = []Updater{
		&upCollector{nodes: c.nodes},
		&loadCollector{nodes: c.nodes},
		&ownershipCollector{nodes: c.nodes},
		&latencyCollector{nodes: c.nodes},
		&hintsCollector{nodes: c.nodes},
		&partitionCollector{nodes: c.nodes},
	}
	if o.Nodetool != nil {
		c.updaters = append(c.updaters, &droppedCollector{nodes: c.nodes, nodetool: o.Nodetool})
	}
	return c, nil
}

// Updaters lists the collectors; monitor.Exporter runs them (concurrently, under its scrape
// timeout, each with its success and duration), with the MongoDB ones, on one registry.
func (c *Collectors) Updaters() []Updater { return append([]Updater(nil), c.updaters...) }

// Close closes every node's session.
func (c *Collectors) Close() {
	for _, n := range c.nodes {
		n.close()
	}
}
