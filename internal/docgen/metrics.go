package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shardmart/shardmart/internal/cassandra/repair"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/readrouting"
	"github.com/shardmart/shardmart/internal/shop"
)

// recorder is a registry that remembers every collector registered into it, so each
// descriptor can be rendered with its collector's type.
type recorder struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
}

func newRecorder() *recorder { return &recorder{reg: prometheus.NewRegistry()} }

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// metricRow is one metric family as the reference lists it.
type metricRow struct {
	name, typ, labels, help string
}

// genMetrics opens the real API process's collectors (an embedded shop in a temporary
// directory, the API handler over it, the store observers) and the optional ones of the
// MongoDB read routing and the Cassandra repairer, and lists every descriptor they register.
func genMetrics(_ string, pages map[string][]byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "docgen-metrics-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	serve := newRecorder()
	httpapi.NewStoreObserver(serve)
	httpapi.NewStatementObserver(serve)
	quiet := slog.New(slog.DiscardHandler)
	s, err := shop.Open(ctx, shop.Config{Backends: placement.Options{SQLitePath: filepath.Join(dir, "shardmart.db")}, Logger: quiet})
	if err != nil {
		return fmt.Errorf("opening an embedded shop: %w", err)
	}
	defer s.Close()
	s.RegisterMetrics(serve)
	httpapi.New(httpapi.Deps{Services: s.API(), AdminToken: strings.Repeat("x", 32), Logger: quiet, Registry: serve,
		OutboxLag: s.Projector.Lag, Ready: s.Stores.Ready, Following: s.CacheFollowing,
		OutboxStats: func(ctx context.Context) (outbox.Stats, error) {
			return outbox.ReadStats(ctx, s.Stores.Outbox, s.OutboxConsumers())
		}})

	routing := newRecorder()
	routing.MustRegister(readrouting.NewMetrics())
	repairer := newRecorder()
	repair.NewMetrics(repairer, time.Now)

	var b strings.Builder
	b.WriteString(header("Metrics", "the descriptors of the collectors the code registers"))
	b.WriteString("`shardmart serve` serves Prometheus metrics at `/metrics` from a private registry, besides the Go\n" +
		"runtime (`go_*`) and process (`process_*`) collectors of client_golang; `shardmart cassandra repair`\n" +
		"serves its own on `--metrics-addr`. What the labels mean and\n" +
		"which outcome each operation reports: [Architecture, Metrics](../architecture.md#metrics). The hot-shard\n" +
		"monitor's cluster metrics (`shardmart_mongo_*`, `shardmart_cassandra_*` of `shardmart monitor`) are\n" +
		"listed in [the monitor reference](../monitor.md), checked against live clusters by their tests; the\n" +
		"Cassandra client's per-host metrics appear where a family is on Cassandra ([Architecture, Metrics](../architecture.md#metrics)).\n")
	for _, sec := range []struct {
		title, intro string
		r            *recorder
	}{
		{"shardmart serve", "Every API process.", serve},
		{"shardmart serve with a family on a MongoDB replica set", "The read routing of reads that may go to a secondary (measured lag, the primary as fallback).", routing},
		{"shardmart cassandra repair", "The repair scheduler (`--metrics-addr`).", repairer},
	} {
		rows, err := rowsOf(ctx, sec.r)
		if err != nil {
			return fmt.Errorf("%s: %w", sec.title, err)
		}
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n| metric | type | labels | help |\n|---|---|---|---|\n", sec.title, sec.intro)
		for _, m := range rows {
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.typ, m.labels, text(m.help))
		}
	}
	pages[path.Join(refDir, "metrics.md")] = []byte(b.String())
	return nil
}

var descString = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), unit: "(?:[^"\\]|\\.)*", constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// unsampledTypes are the types of the series custom collectors emit only once they have
// measured something (a replica set's lag, a table's repair): a descriptor carries no type.
var unsampledTypes = map[string]string{
	readrouting.MetricReads:                             "counter",
	readrouting.MetricMemberLag:                         "gauge",
	readrouting.MetricOplogWindow:                       "gauge",
	readrouting.MetricOplogHeadroom:                     "gauge",
	readrouting.MetricSnapshotAge:                       "gauge",
	"shardmart_cassandra_repair_seconds_since_complete": "gauge",
}

// rowsOf lists every descriptor of r's collectors, sorted by name.
func rowsOf(ctx context.Context, r *recorder) ([]metricRow, error) {
	var rows []metricRow
	for _, c := range r.collectors {
		typ := collectorType(c)
		var sampled map[string]string
		if typ == "" {
			var err error
			if sampled, err = sampleTypes(ctx, c); err != nil {
				return nil, err
			}
		}
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descString.FindStringSubmatch(d.String())
			if m == nil {
				return nil, fmt.Errorf("unexpected descriptor %s", d)
			}
			name, err := strconv.Unquote(m[1])
			if err != nil {
				return nil, err
			}
			help, err := strconv.Unquote(m[2])
			if err != nil {
				return nil, err
			}
			t := typ
			if t == "" {
				t = sampled[name]
			}
			if t == "" {
				t = unsampledTypes[name]
			}
			if t == "" {
				return nil, fmt.Errorf("%s: no type (its collector emitted no sample)", name)
			}
			var labels []string
			for _, l := range strings.Split(m[4], ",") {
				if l != "" {
					labels = append(labels, "`"+l+"`")
				}
			}
			if m[3] != "" {
				labels = append(labels, "`"+m[3]+"`")
			}
			rows = append(rows, metricRow{name: name, typ: t, labels: orDash(strings.Join(labels, ", ")), help: help})
		}
	}
	slices.SortFunc(rows, func(a, b metricRow) int { return strings.Compare(a.name, b.name) })
	return rows, nil
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// collectorType is the type of a client_golang metric or vector, "" for other collectors.
func collectorType(c prometheus.Collector) string {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec, prometheus.Histogram:
		return "histogram"
	case *prometheus.SummaryVec, prometheus.Summary:
		return "summary"
	case prometheus.Gauge:
		return "gauge"
	case prometheus.Counter:
		return "counter"
	}
	return ""
}

// sampleTypes collects c once and reads each sample's type.
func sampleTypes(ctx context.Context, c prometheus.Collector) (map[string]string, error) {
	ch := make(chan prometheus.Metric, 256)
	go func() { c.Collect(ch); close(ch) }()
	out := map[string]string{}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("collecting samples: %w", ctx.Err())
		case m, ok := <-ch:
			if !ok {
				return out, nil
			}
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				return nil, err
			}
			name := descString.FindStringSubmatch(m.Desc().String())
			if name == nil {
				return nil, fmt.Errorf("unexpected descriptor %s", m.Desc())
			}
			n, _ := strconv.Unquote(name[1])
			switch {
			case pb.Counter != nil:
				out[n] = "counter"
			case pb.Gauge != nil:
				out[n] = "gauge"
			case pb.Histogram != nil:
				out[n] = "histogram"
			case pb.Summary != nil:
				out[n] = "summary"
			default:
				out[n] = "untyped"
			}
		}
	}
}
