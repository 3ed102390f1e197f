package monitor

import (
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardmart/shardmart/internal/sharechart"
)

// PageOptions configure the built-in page.
type PageOptions struct {
	Interval   time.Duration // between two gathers (--page-interval); also the page's refresh
	Keep       int           // samples kept for the charts (0: DefaultPageKeep)
	FloorBytes float64
	Logger     *slog.Logger
}

// DefaultPageKeep samples: an hour at the default 15 s interval.
const DefaultPageKeep = 240

// Page is the monitor's built-in page at /: per collection the shards' data and write shares
// over time, current alerts with their reasons and advice, the balancer and recent chunk moves.
// It gathers on its own interval, not per request, so a page left open adds no load on the
// cluster beyond one scrape per interval, and the shares have a history to draw.
type Page struct {
	g prometheus.Gatherer
	o PageOptions

	mu      sync.Mutex
	hist    history
	report  *Report // of the last gather
	at      time.Time
	lastErr error
}

// NewPage makes the page of g; Run (or Sample) fills it.
func NewPage(g prometheus.Gatherer, o PageOptions) *Page {
	if o.Keep <= 0 {
		o.Keep = DefaultPageKeep
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Page{g: g, o: o, hist: history{keep: o.Keep, interval: o.Interval}}
}

// Run samples now and then every interval until ctx ends.
func (p *Page) Run(ctx context.Context) {
	t := time.NewTicker(p.o.Interval)
	defer t.Stop()
	for {
		if err := p.Sample(); err != nil {
			p.o.Logger.Warn("page: gather failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample gathers once: the report for the alerts, and one tick of history. A failing collector
// is part of the report; only a failed gather as a whole is an error (shown on the page).
func (p *Page) Sample() error {
	mfs, err := p.g.Gather()
	now := time.Now()
	if err != nil && len(mfs) == 0 {
		p.mu.Lock()
		p.lastErr = err
		p.mu.Unlock()
		return fmt.Errorf("monitor page: gather: %w", err)
	}
	// Judged and sampled outside the lock: a page request never waits for it.
	s := index(mfs)
	r := buildReport(s, p.o.FloorBytes)
	sn := takeSnapshot(s, now)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastErr = err
	p.report, p.at = &r, now
	p.hist.add(sn)
	return err
}

//go:embed page.html
var pageHTML string

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"bytes": bytesText,
	"secs":  secondsText,
	"pct":   func(f float64) string { return fmt.Sprintf("%.1f %%", 100*f) },
	"svg":   func(p sharechart.Panel) template.HTML { return template.HTML(sharechart.PanelSVG(p)) }, // PanelSVG escapes every text
}).Parse(pageHTML))

// pageData is what the template reads.
type pageData struct {
	Refresh  int // seconds
	At       string
	Interval time.Duration
	Keep     int
	Err      error
	Report   *Report
	Charts   map[string]sharechart.Panel // by namespace
	Hot      []hotAlert
}

type hotAlert struct {
	What, Where, Why, Advice string
}

func (p *Page) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	d := pageData{Refresh: max(int(p.o.Interval.Seconds()), 1), Interval: p.o.Interval, Keep: p.o.Keep, Err: p.lastErr, Report: p.report,
		Charts: map[string]sharechart.Panel{}}
	if p.report != nil {
		d.At = p.at.UTC().Format("2006-01-02 15:04:05 MST")
		if m := p.report.Mongo; m != nil {
			for _, ns := range m.Namespaces {
				d.Charts[ns.Namespace] = p.hist.panel(ns.Namespace)
				for _, row := range ns.Rows {
					if row.Hot {
						d.Hot = append(d.Hot, hotAlert{"HOT shard", ns.Namespace + " on " + row.Shard, row.Notes[0], row.Advice})
					}
				}
			}
		}
		if c := p.report.Cassandra; c != nil {
			for _, row := range c.Rows {
				if row.Hot {
					d.Hot = append(d.Hot, hotAlert{"HOT node", row.Shard, row.Notes[0], row.Advice})
				}
			}
		}
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := pageTmpl.Execute(w, d); err != nil {
		p.o.Logger.Warn("page: render", "err", err)
	}
}
