package cassandracollect

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The exporter self-metrics of docs/monitor.md. The MongoDB collectors emit the same names,
// possibly into the same registry, and a registry refuses one name with two help strings:
// keep these texts identical to theirs.
var (
	successDesc = prometheus.NewDesc("shardmart_monitor_collector_success",
		"1 if the collector's last run succeeded", []string{"collector"}, nil)
	durationDesc = prometheus.NewDesc("shardmart_monitor_collector_duration_seconds",
		"how long the collector's last run took", []string{"collector"}, nil)
)

// runUpdater runs u and reports its success and duration, node_exporter style.
func runUpdater(ctx context.Context, u Updater, ch chan<- prometheus.Metric, logger *slog.Logger) {
	start := time.Now()
	err := u.Update(ctx, ch)
	ok := 1.0
	if err != nil {
		ok = 0
		logger.Warn("cassandra collector failed", "collector", u.Name(), "err", err)
	}
	ch <- prometheus.MustNewConstMetric(durationDesc, prometheus.GaugeValue, time.Since(start).Seconds(), u.Name())
	ch <- prometheus.MustNewConstMetric(successDesc, prometheus.GaugeValue, ok, u.Name())
}
