// Package monitor is the hot-shard exporter's core: it runs the engine collectors
// (internal/monitor/mongocollect, internal/monitor/cassandracollect) at scrape time under one
// per-scrape timeout, reports each collector's success and duration as node_exporter does,
// serves /metrics, and prints the --once summary. docs/monitor.md is the metric contract.
package monitor

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/shardmart/shardmart/internal/advise/live"
)

// Collector is one source of series, queried at scrape time. Update sends what it read to ch
// and returns an error only when the collector itself failed: a shard or node that is down is
// a series of its own (shard_up, node_up), not a failure. Update must stop sending once ctx
// ends: ch is closed after the scrape.
type Collector interface {
	Name() string
	Update(ctx context.Context, ch chan<- prometheus.Metric) error
}

var (
	successDesc = prometheus.NewDesc("shardmart_monitor_collector_success",
		"1 if the collector's last run succeeded", []string{"collector"}, nil)
	durationDesc = prometheus.NewDesc("shardmart_monitor_collector_duration_seconds",
		"how long the collector's last run took", []string{"collector"}, nil)
)

// Exporter runs every collector concurrently on each scrape.
type Exporter struct {
	collectors []Collector
	timeout    time.Duration
	logger     *slog.Logger
	scrapes    atomic.Uint64
}

// NewExporter wraps collectors; timeout bounds each scrape as a whole.
func NewExporter(collectors []Collector, timeout time.Duration, logger *slog.Logger) *Exporter {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Exporter{collectors: collectors, timeout: timeout, logger: logger}
}

// Describe sends nothing: the exporter is an unchecked collector, since which series exist
// depends on what the cluster holds at scrape time.
func (e *Exporter) Describe(chan<- *prometheus.Desc) {}

// Collect runs one scrape.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(WithScrape(context.Background(), e.scrapes.Add(1)), e.timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range e.collectors {
		wg.Go(func() {
			start := time.Now()
			err := c.Update(ctx, ch)
			ok := 1.0
			if err != nil {
				ok = 0
				e.logger.Warn("collector failed", "collector", c.Name(), "err", err)
			}
			ch <- prometheus.MustNewConstMetric(durationDesc, prometheus.GaugeValue, time.Since(start).Seconds(), c.Name())
			ch <- prometheus.MustNewConstMetric(successDesc, prometheus.GaugeValue, ok, c.Name())
		})
	}
	wg.Wait()
}

type scrapeKey struct{}

// WithScrape marks ctx as belonging to scrape id, so collectors of one engine can share what
// one of them discovered during that scrape (the shard list) instead of asking again.
func WithScrape(ctx context.Context, id uint64) context.Context {
	return context.WithValue(ctx, scrapeKey{}, id)
}

// ScrapeID is the scrape ctx belongs to, or 0 outside a scrape (nothing is shared then).
func ScrapeID(ctx context.Context) uint64 {
	id, _ := ctx.Value(scrapeKey{}).(uint64)
	return id
}

// Options configure a registry.
type Options struct {
	Collectors    []Collector
	ScrapeTimeout time.Duration
	HotFloorBytes float64 // exported as shardmart_monitor_hot_floor_bytes for the alert rules
	// AdviseURI, when set, is exported (without its password) as the uri label of
	// shardmart_monitor_advise_from_info, so the alert rules and the report can print the exact
	// `shardmart advise --from … --collection …` command for a hot collection.
	AdviseURI string
	Logger    *slog.Logger
}

const adviseInfoMetric = "shardmart_monitor_advise_from_info"

// NewRegistry is a private registry holding the exporter and the floor gauge; the caller adds
// process metrics if it wants them. Nothing is registered globally.
func NewRegistry(o Options) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	floor := prometheus.NewGauge(prometheus.GaugeOpts{Name: "shardmart_monitor_hot_floor_bytes",
		Help: "--hot-floor-bytes: the absolute floor of the data-size alert"})
	floor.Set(o.HotFloorBytes)
	reg.MustRegister(floor, NewExporter(o.Collectors, o.ScrapeTimeout, o.Logger))
	// A URI that does not parse is not exported (the command names MONGOS_URI instead): the
	// CLI refuses it at start, and a label must never carry what could not be cleaned.
	if uri, err := live.URIWithoutPassword(o.AdviseURI); o.AdviseURI != "" && err == nil {
		info := prometheus.NewGauge(prometheus.GaugeOpts{Name: adviseInfoMetric,
			Help:        "The connection string (password left out) `shardmart advise --from` should read hot collections from",
			ConstLabels: prometheus.Labels{"uri": uri}})
		info.Set(1)
		reg.MustRegister(info)
	}
	return reg
}

// Handler serves /metrics from g, and page at / when it is not nil. A collector error never
// fails the scrape: it is the collector_success series.
func Handler(g prometheus.Gatherer, page http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	if page != nil {
		mux.Handle("GET /{$}", page)
	}
	return mux
}
