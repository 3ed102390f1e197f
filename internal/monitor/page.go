package monitor

import (
	"context"
	"fmt"
	"html/template"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardmart/shardmart/internal/sharechart"
)

// Page is the monitor's built-in page: per collection, each shard's data share and write share
// over the recent past, the current alerts (the Report: hot shards and nodes with their
// reasons, what to do, shards and nodes down, failing collectors), the balancer's state and
// the recent migrations. It samples the gatherer on its own interval and keeps the last Keep
// samples, so the history is bounded and costs one scrape per interval.
type Page struct {
	g      prometheus.Gatherer
	floor  float64
	keep   int
	logger *slog.Logger

	mu      sync.Mutex
	samples []pageSample // oldest first
	report  Report
	at      time.Time
}

// pageSample is one gather: per namespace and shard, owned data bytes and the writes counter.
type pageSample struct {
	data, writes map[string]map[string]float64
}

// NewPage samples g; keep bounds the history (default 240: an hour at 15 s).
func NewPage(g prometheus.Gatherer, floorBytes float64, keep int, logger *slog.Logger) *Page {
	if keep <= 0 {
		keep = 240
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Page{g: g, floor: floorBytes, keep: keep, logger: logger}
}

// Run samples every interval until ctx ends, starting at once.
func (p *Page) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := p.Sample(); err != nil {
			p.logger.Warn("monitor page: sample", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sample gathers once and adds the result to the history.
func (p *Page) Sample() error {
	mfs, err := p.g.Gather()
	if err != nil {
		return fmt.Errorf("monitor page: gather: %w", err)
	}
	s := index(mfs)
	ps := pageSample{data: byNamespace(s["shardmart_mongo_collection_data_bytes"], nil),
		writes: byNamespace(s["shardmart_mongo_collection_operations_total"], map[string]string{"op": "writes"})}
	r := BuildReport(mfs, p.floor)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples = append(p.samples, ps)
	if len(p.samples) > p.keep {
		p.samples = slices.Delete(p.samples, 0, len(p.samples)-p.keep)
	}
	p.report, p.at = r, time.Now()
	return nil
}

// byNamespace maps namespace → shard → value for the samples whose labels include match.
func byNamespace(xs []sample, match map[string]string) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, x := range xs {
		if !labelsMatch(x.labels, match) {
			continue
		}
		ns := x.labels["namespace"]
		if out[ns] == nil {
			out[ns] = map[string]float64{}
		}
		out[ns][x.labels["shard"]] = x.value
	}
	return out
}

func labelsMatch(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// chart is one collection's panel.
type chart struct {
	Namespace string
	SVG       template.HTML
}

// charts draws one panel per namespace: per sample, data shares from the bytes, write shares
// from the writes counter's increase since the previous sample (a reset counts as none).
func (p *Page) charts() []chart {
	namespaces := map[string]bool{}
	for _, s := range p.samples {
		for ns := range s.data {
			namespaces[ns] = true
		}
	}
	var out []chart
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		shardSet := map[string]bool{}
		for _, s := range p.samples {
			for sh := range s.data[ns] {
				shardSet[sh] = true
			}
		}
		shards := slices.Sorted(maps.Keys(shardSet))
		// A write share needs two samples: with more than one, the first only serves as the
		// writes' starting point.
		var data, writes [][]int64
		for i, s := range p.samples {
			if i == 0 && len(p.samples) > 1 {
				continue
			}
			d, w := make([]int64, len(shards)), make([]int64, len(shards))
			for j, sh := range shards {
				d[j] = int64(s.data[ns][sh])
				if i > 0 {
					w[j] = max(0, int64(s.writes[ns][sh]-p.samples[i-1].writes[ns][sh]))
				}
			}
			data, writes = append(data, d), append(writes, w)
		}
		const w, h = 420, 150
		var b strings.Builder
		fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" font-family="sans-serif" font-size="11">`, w+60, h+30)
		fmt.Fprintf(&b, `<g transform="translate(44,10)">`)
		sharechart.Frame(&b, w, h)
		sharechart.Series(&b, data, writes, shards, w, h)
		b.WriteString(`</g></svg>`)
		out = append(out, chart{Namespace: ns, SVG: template.HTML(b.String())}) // sharechart escapes every name
	}
	return out
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"bytes": bytesText,
	"pct":   func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"join":  func(s []string) string { return orNone(s) },
	"notes": func(s []string) string { return strings.Join(s, "; ") },
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="15">
<title>shardmart monitor</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
.alert{border-left:4px solid #d62728;background:#fff4f4;padding:.4em .8em;margin:.4em 0}
.ok{border-left:4px solid #2ca02c;background:#f4fff4;padding:.4em .8em}
table{border-collapse:collapse}td,th{padding:.2em .7em;border-bottom:1px solid #eee;text-align:left}
.charts{display:flex;flex-wrap:wrap;gap:1em}.panel{border:1px solid #ddd;padding:.5em}
.muted{color:#666}
</style></head><body>
<h1>shardmart monitor</h1>
<p class="muted">{{.Samples}} sample(s){{if not .At.IsZero}}, last at {{.At.Format "15:04:05"}}{{end}}; hot floor {{bytes .R.FloorBytes}}. Solid: data share per shard; dashed: write share. <a href="/metrics">/metrics</a></p>
<h2 id="alerts">Current alerts</h2>
{{- $any := false}}
{{- range .R.Failed}}{{$any = true}}<div class="alert">collector <b>{{.}}</b> failed (see the log)</div>{{end}}
{{- with .R.Mongo}}{{range .Down}}{{$any = true}}<div class="alert">MongoDB shard <b>{{.}}</b> is down</div>{{end}}
{{- range .Namespaces}}{{$ns := .Namespace}}{{range .Rows}}{{if .Hot}}{{$any = true}}<div class="alert hot">Hot shard <b>{{.Shard}}</b> for <b>{{$ns}}</b>: {{index .Notes 0}}</div>{{end}}{{end}}{{end}}
{{- range .Todo}}<div class="alert todo">What to do: {{.}}</div>{{end}}{{end}}
{{- with .R.Cassandra}}{{range .Down}}{{$any = true}}<div class="alert">Cassandra node <b>{{.}}</b> is down</div>{{end}}
{{- range .Rows}}{{if .Hot}}{{$any = true}}<div class="alert hot">Hot Cassandra node <b>{{.Shard}}</b>: {{index .Notes 0}}</div>{{end}}{{end}}
{{- range .Todo}}<div class="alert todo">What to do: {{.}}</div>{{end}}{{end}}
{{- if not $any}}<div class="ok">No alert.</div>{{end}}
{{with .R.Mongo}}
<h2>MongoDB</h2>
<p id="balancer">Balancer: <b>{{.Balancer}}</b>{{if .InRound}} (in a balancing round){{end}}. Shards up: {{join .Up}}; down: {{join .Down}}.</p>
<div class="charts">{{range $.Charts}}<div class="panel"><div><b>{{.Namespace}}</b></div>{{.SVG}}</div>{{end}}</div>
<table><tr><th>collection</th><th>shard</th><th>data</th><th>share</th><th>documents</th><th>chunks</th><th></th></tr>
{{range .Namespaces}}{{$ns := .Namespace}}{{range .Rows}}<tr><td>{{$ns}}</td><td>{{.Shard}}</td><td>{{bytes .DataBytes}}</td><td>{{pct .Fraction}}</td><td>{{printf "%.0f" .Documents}}</td><td>{{printf "%.0f" .Chunks}}</td><td>{{notes .Notes}}</td></tr>
{{end}}{{end}}</table>
<h2>Recent migrations</h2>
{{if .Migrations}}<table id="migrations"><tr><th>collection</th><th>from</th><th>to</th><th>result</th><th>count</th></tr>
{{range .Migrations}}<tr><td>{{.Namespace}}</td><td>{{.From}}</td><td>{{.To}}</td><td>{{.Result}}</td><td>{{printf "%.0f" .Count}}</td></tr>
{{end}}</table>{{else}}<p class="muted" id="migrations">None in the window.</p>{{end}}
{{end}}
{{with .R.Cassandra}}
<h2>Cassandra</h2>
<p>Nodes up: {{join .Up}}; down: {{join .Down}}.</p>
<table><tr><th>node</th><th>load</th><th>share</th><th></th></tr>
{{range .Rows}}<tr><td>{{.Shard}}</td><td>{{bytes .DataBytes}}</td><td>{{pct .Fraction}}</td><td>{{notes .Notes}}</td></tr>
{{end}}</table>
{{end}}
</body></html>
`))

// ServeHTTP renders the page; before the first sample it takes one.
func (p *Page) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	empty := len(p.samples) == 0
	p.mu.Unlock()
	if empty {
		if err := p.Sample(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	p.mu.Lock()
	data := struct {
		R       Report
		Charts  []chart
		Samples int
		At      time.Time
	}{p.report, p.charts(), len(p.samples), p.at}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pageTmpl.Execute(w, data); err != nil {
		p.logger.Warn("monitor page: render", "err", err)
	}
}
