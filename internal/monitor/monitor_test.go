package monitor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// collectorFunc is a Collector from a function: the exporter's own behaviour is under test.
type collectorFunc struct {
	name string
	fn   func(ctx context.Context, ch chan<- prometheus.Metric) error
}

func (c collectorFunc) Name() string { return c.name }
func (c collectorFunc) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	return c.fn(ctx, ch)
}

// One collector failing and one outliving the scrape timeout fail on their own: the scrape
// succeeds, the working collector's series are there, and each reports its success.
func TestExporterReportsEachCollector(t *testing.T) {
	g := prometheus.NewDesc("x_value", "x", nil, nil)
	reg := NewRegistry(Options{ScrapeTimeout: 100 * time.Millisecond, HotFloorBytes: 64 << 20, Collectors: []Collector{
		collectorFunc{"ok", func(_ context.Context, ch chan<- prometheus.Metric) error {
			ch <- prometheus.MustNewConstMetric(g, prometheus.GaugeValue, 7)
			return nil
		}},
		collectorFunc{"broken", func(context.Context, chan<- prometheus.Metric) error { return errors.New("refused") }},
		collectorFunc{"slow", func(ctx context.Context, _ chan<- prometheus.Metric) error {
			<-ctx.Done()
			return ctx.Err()
		}},
		collectorFunc{"scrape", func(ctx context.Context, _ chan<- prometheus.Metric) error {
			if ScrapeID(ctx) == 0 {
				return errors.New("no scrape id in the context")
			}
			return nil
		}},
	}})
	start := time.Now()
	want := `
# HELP shardmart_monitor_collector_success 1 if the collector's last run succeeded
# TYPE shardmart_monitor_collector_success gauge
shardmart_monitor_collector_success{collector="broken"} 0
shardmart_monitor_collector_success{collector="ok"} 1
shardmart_monitor_collector_success{collector="scrape"} 1
shardmart_monitor_collector_success{collector="slow"} 0
# HELP shardmart_monitor_hot_floor_bytes --hot-floor-bytes: the absolute floor of the data-size alert
# TYPE shardmart_monitor_hot_floor_bytes gauge
shardmart_monitor_hot_floor_bytes 6.7108864e+07
# HELP x_value x
# TYPE x_value gauge
x_value 7
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "shardmart_monitor_collector_success", "shardmart_monitor_hot_floor_bytes", "x_value"); err != nil {
		t.Error(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("scrape took %s, want about the 100 ms timeout", took)
	}
	if n, err := testutil.GatherAndCount(reg, "shardmart_monitor_collector_duration_seconds"); err != nil || n != 4 {
		t.Errorf("collector_duration_seconds: %d series (%v), want 4", n, err)
	}
}
