package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardmart/shardmart/internal/outbox"
)

// httpMetrics are per route pattern and status class ("2xx", ...): bounded label sets.
type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "shardmart_http_requests_total",
			Help: "HTTP requests by route pattern and status class.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "shardmart_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern and status class.",
			Buckets: latencyBuckets,
		}, []string{"route", "code"}),
	}
	m.requests = registerOrReuse(reg, m.requests)
	m.latency = registerOrReuse(reg, m.latency)
	return m
}

// routeObserver resolves one route's series once per status class, on first use, so the hot
// path does no label hashing and /metrics shows only classes that happened.
type routeObserver struct {
	m       *httpMetrics
	route   string
	classes [6]struct {
		once  sync.Once
		count prometheus.Counter
		hist  prometheus.Observer
	}
}

var classNames = [6]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

func (m *httpMetrics) forRoute(route string) *routeObserver {
	return &routeObserver{m: m, route: route}
}

func (o *routeObserver) observe(status int, d time.Duration) {
	if status == 0 {
		status = 200 // a handler that wrote nothing sent an implicit 200
	}
	i := status / 100
	if i < 1 || i > 5 {
		i = 0
	}
	c := &o.classes[i]
	c.once.Do(func() {
		c.count = o.m.requests.WithLabelValues(o.route, classNames[i])
		c.hist = o.m.latency.WithLabelValues(o.route, classNames[i])
	})
	c.count.Inc()
	c.hist.Observe(d.Seconds())
}

// registerOrReuse registers c, or returns the collector already registered under the same
// descriptors (a second New on one registry, as tests do).
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("httpapi: register metric: %v", err))
	}
	return c
}

// lagCollector reads the outbox lag at scrape time, so the gauge is never stale.
type lagCollector struct {
	lag func(ctx context.Context) (int64, error)
	log *slog.Logger
}

var lagDesc = prometheus.NewDesc("shardmart_outbox_lag_messages",
	"Outbox messages committed but not yet applied by the projector.", nil, nil)

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- lagDesc }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	n, err := c.lag(ctx)
	if err != nil {
		// An absent series (not a fake zero) tells the alert the lag is unknown.
		c.log.Warn("outbox lag unavailable", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(n))
}

// outboxCollector reads the outbox's size and its oldest unconsumed row at scrape time: a
// consumer that stops holds pruning back, and the age grows until someone looks.
type outboxCollector struct {
	stats func(ctx context.Context) (outbox.Stats, error)
	now   func() time.Time
	log   *slog.Logger
}

var (
	outboxRowsDesc = prometheus.NewDesc("shardmart_outbox_rows",
		"Rows the outbox holds (pruned once every consumer has passed them).", nil, nil)
	outboxAgeDesc = prometheus.NewDesc("shardmart_outbox_oldest_unconsumed_age_seconds",
		"Age of the oldest outbox row some consumer has not passed yet; 0 when all are up to date.", nil, nil)
)

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- outboxRowsDesc
	ch <- outboxAgeDesc
}

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.stats(ctx)
	if err != nil {
		c.log.Warn("outbox stats unavailable", "err", err)
		return // absent series: unknown, not zero
	}
	age := 0.0
	if !st.OldestUnconsumed.IsZero() {
		age = max(c.now().Sub(st.OldestUnconsumed).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(outboxRowsDesc, prometheus.GaugeValue, float64(st.Rows))
	ch <- prometheus.MustNewConstMetric(outboxAgeDesc, prometheus.GaugeValue, age)
}

// slogErrorLog adapts promhttp's error log to slog.
type slogErrorLog struct{ l *slog.Logger }

func (e slogErrorLog) Println(v ...any) { e.l.Error("metrics: " + fmt.Sprint(v...)) }
