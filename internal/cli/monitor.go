package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/advise/live"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/monitor"
	"github.com/shardmart/shardmart/internal/monitor/cassandracollect"
	"github.com/shardmart/shardmart/internal/monitor/mongocollect"
)

// monitorOptions are `monitor`'s settings.
type monitorOptions struct {
	Addr            string
	MongoURI        string
	AdviseURI       string // for the advise command in alerts and the report; default MongoURI
	CassandraHosts  string // comma-separated
	CassandraConn   cassandraConnFlags
	HotFloorBytes   int64
	ChunkMoveWindow time.Duration
	ScrapeTimeout   time.Duration
	PageInterval    time.Duration
	Once            bool
}

// cassandraCollectors builds the Cassandra collectors for hosts and a function closing their
// sessions. No nodetool runner is given: dropped messages per verb exist over JMX only, which
// Cassandra binds to localhost, so that series is absent here (docs/monitor.md).
func cassandraCollectors(ctx context.Context, hosts []string, conn cassandraConnFlags, timeout time.Duration, logger *slog.Logger) ([]monitor.Collector, func(), error) {
	cn, err := conn.connection()
	if err != nil {
		return nil, nil, err
	}
	cc, err := cassandracollect.New(ctx, cassandracollect.Options{Hosts: hosts, Timeout: timeout, Logger: logger, Conn: cn})
	if err != nil {
		return nil, nil, fmt.Errorf("cassandra collectors: %w", err)
	}
	var cols []monitor.Collector
	for _, u := range cc.Updaters() {
		cols = append(cols, u)
	}
	return cols, cc.Close, nil
}

// newCmdMonitor builds `monitor`; runF, if not nil, replaces runMonitor (tests).
func newCmdMonitor(stdio IO, runF func(context.Context, monitorOptions) error) *cobra.Command {
	var o monitorOptions
	cmd := &cobra.Command{
		Use:   "monitor",
		Short: "Hot-shard monitor: a Prometheus exporter for MongoDB shards and Cassandra nodes (--once: a summary table)",
		Long: `Exports per-shard MongoDB figures (chunks, data size and documents per collection
without orphans, long operations, load, connections, CPU, latency, bytes, balancer state,
chunk moves) on /metrics, queried at scrape time. --mongo-uri may name a mongos or a config
server. --once scrapes once and prints, per collection, each shard's data, share and chunks,
which shard is hot and what to do. See docs/monitor.md.

  shardmart monitor --mongo-uri mongodb://mongos:27017
  shardmart monitor --mongo-uri mongodb://127.0.0.1:27019/?replicaSet=cfg --once --hot-floor-bytes 1048576`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return runOrRunF(cmd.Context(), stdio, o, runMonitor, runF)
		},
	}
	f := cmd.Flags()
	// No SHARDMART_ADDR: that is serve's address, and both may run on one host.
	f.StringVar(&o.Addr, "addr", "127.0.0.1:9108", "listen address of /metrics")
	f.StringVar(&o.MongoURI, "mongo-uri", "", "MongoDB connection string of a mongos or a config server; its credentials and TLS settings are reused for each shard")
	f.StringVar(&o.AdviseURI, "advise-uri", "", "mongos URI the hot-shard advice's `shardmart advise --from` command names (default: --mongo-uri; give a mongos when --mongo-uri is a config server); its password is left out")
	f.StringVar(&o.CassandraHosts, "cassandra-hosts", "", "Cassandra nodes to monitor, comma-separated")
	f.Int64Var(&o.HotFloorBytes, "hot-floor-bytes", 64<<20, "a shard is hot only with at least this much data of a collection (exported as shardmart_monitor_hot_floor_bytes for the alert rules)")
	f.DurationVar(&o.ChunkMoveWindow, "chunk-move-window", time.Hour, "how far back chunk moves are counted from config.changelog")
	f.DurationVar(&o.ScrapeTimeout, "scrape-timeout", 10*time.Second, "time limit of one scrape; a shard that does not answer within half of it is down")
	f.DurationVar(&o.PageInterval, "page-interval", 15*time.Second, "how often the page at / gathers (its charts keep the last 240 samples; the page reloads as often)")
	f.BoolVar(&o.Once, "once", false, "scrape once, print the hot-shard summary and exit (no server)")
	fromEnv(f, "mongo-uri", "SHARDMART_MONGO_URI")
	fromEnv(f, "cassandra-hosts", "SHARDMART_CASSANDRA_HOSTS")
	o.CassandraConn.register(f)
	return cmd
}

func (o monitorOptions) validate() error {
	switch {
	case o.MongoURI == "" && len(o.cassandraHosts()) == 0:
		return errors.New("nothing to monitor: pass --mongo-uri (a mongos or a config server) and/or --cassandra-hosts")
	case o.HotFloorBytes < 0:
		return fmt.Errorf("--hot-floor-bytes %d: want 0 or more", o.HotFloorBytes)
	case o.ChunkMoveWindow <= 0:
		return fmt.Errorf("--chunk-move-window %s: want more than 0", o.ChunkMoveWindow)
	case o.ScrapeTimeout <= 0:
		return fmt.Errorf("--scrape-timeout %s: want more than 0", o.ScrapeTimeout)
	case o.PageInterval < time.Second:
		return fmt.Errorf("--page-interval %s: want 1s or more", o.PageInterval)
	case !o.Once && o.Addr == "":
		return errors.New("--addr is empty: give a listen address, or --once")
	}
	if o.MongoURI != "" {
		if err := options.Client().ApplyURI(o.MongoURI).Validate(); err != nil {
			return fmt.Errorf("--mongo-uri: %w", err)
		}
	}
	// The advise command printed in alerts is built from this URI: one that cannot be
	// cleaned of its password is refused now rather than replaced later.
	if uri, flag := o.AdviseURI, "--advise-uri"; uri != "" || o.MongoURI != "" {
		if uri == "" {
			uri, flag = o.MongoURI, "--mongo-uri (the default --advise-uri)"
		}
		if _, err := live.URIWithoutPassword(uri); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	return nil
}

func (o monitorOptions) cassandraHosts() []string {
	var out []string
	for _, h := range strings.Split(o.CassandraHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// runMonitor serves /metrics until ctx ends (SIGINT/SIGTERM in main), or prints one summary.
func runMonitor(ctx context.Context, stdio IO, o monitorOptions) error {
	logger := slog.New(slog.NewTextHandler(stdio.Err, nil))
	var cols []monitor.Collector
	if o.MongoURI != "" {
		mc, err := mongocollect.Open(mongocollect.Options{URI: o.MongoURI, ChunkMoveWindow: o.ChunkMoveWindow, Logger: logger})
		if err != nil {
			return err
		}
		defer func() { _ = mc.Close(context.WithoutCancel(ctx)) }()
		cols = append(cols, mc.Collectors()...)
	}
	if hosts := o.cassandraHosts(); len(hosts) > 0 {
		cc, closeFn, err := cassandraCollectors(ctx, hosts, o.CassandraConn, o.ScrapeTimeout, logger)
		if err != nil {
			return err
		}
		defer closeFn()
		cols = append(cols, cc...)
	}
	if len(cols) == 0 {
		return errors.New("nothing to monitor: no collector could be built")
	}
	adviseURI := o.AdviseURI
	if adviseURI == "" {
		adviseURI = o.MongoURI
	}
	reg := monitor.NewRegistry(monitor.Options{Collectors: cols, ScrapeTimeout: o.ScrapeTimeout,
		HotFloorBytes: float64(o.HotFloorBytes), AdviseURI: adviseURI, Logger: logger})
	if o.Once {
		return monitor.Once(stdio.Out, reg, float64(o.HotFloorBytes))
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Addr, err)
	}
	page := monitor.NewPage(reg, monitor.PageOptions{Interval: o.PageInterval, FloorBytes: float64(o.HotFloorBytes), Logger: logger})
	pageCtx, stopPage := context.WithCancel(ctx)
	defer stopPage()
	go page.Run(pageCtx)
	logger.Info("monitor serving / and /metrics", "addr", ln.Addr().String(), "collectors", len(cols), "page_interval", o.PageInterval)
	if err := httpapi.Serve(ctx, ln, monitor.Handler(reg, page), 5*time.Second, logger); err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	logger.Info("monitor stopped")
	return nil
}
