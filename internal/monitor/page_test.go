package monitor

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// fakeMongo publishes the series the page reads; writes[i] is sample i's write counter per shard.
func fakeMongo(ns string, perCollection bool, writes [][2]float64) *prometheus.Registry {
	up := prometheus.NewDesc("shardmart_mongo_shard_up", "", []string{"shard"}, nil)
	data := prometheus.NewDesc("shardmart_mongo_collection_data_bytes", "", []string{"namespace", "shard"}, nil)
	collOps := prometheus.NewDesc("shardmart_mongo_collection_operations_total", "", []string{"namespace", "shard", "op"}, nil)
	ops := prometheus.NewDesc("shardmart_mongo_operations_total", "", []string{"shard", "type"}, nil)
	bal := prometheus.NewDesc("shardmart_mongo_balancer_enabled", "", []string{"shard"}, nil)
	i := 0
	return NewRegistry(Options{ScrapeTimeout: time.Second, HotFloorBytes: 1 << 20, AdviseURI: "mongodb://admin:s3cret@mongos:27017/?authSource=admin", Collectors: []Collector{
		collectorFunc{"mongo_fake", func(_ context.Context, ch chan<- prometheus.Metric) error {
			w := writes[min(i, len(writes)-1)]
			i++
			ch <- prometheus.MustNewConstMetric(up, prometheus.GaugeValue, 1, "sh0")
			ch <- prometheus.MustNewConstMetric(up, prometheus.GaugeValue, 0, "sh<2>")
			ch <- prometheus.MustNewConstMetric(bal, prometheus.GaugeValue, 0, "config")
			ch <- prometheus.MustNewConstMetric(data, prometheus.GaugeValue, 3<<20, ns, "sh0")
			ch <- prometheus.MustNewConstMetric(data, prometheus.GaugeValue, 1<<20, ns, "sh1")
			for s, sh := range []string{"sh0", "sh1"} {
				if perCollection {
					ch <- prometheus.MustNewConstMetric(collOps, prometheus.CounterValue, w[s], ns, sh, "writes")
					ch <- prometheus.MustNewConstMetric(collOps, prometheus.CounterValue, 1e6, ns, sh, "reads")
				} else {
					ch <- prometheus.MustNewConstMetric(ops, prometheus.CounterValue, w[s], sh, "insert")
					ch <- prometheus.MustNewConstMetric(ops, prometheus.CounterValue, 1e6, sh, "query")
				}
			}
			return nil
		}},
	}})
}

func render(t *testing.T, p *Page) string {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler(prometheus.NewRegistry(), p).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	b, _ := io.ReadAll(rec.Result().Body)
	if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	return string(b)
}

// The write share is the rate between samples: counters 0/0 → 10/30 → 40/40 give 25 %/75 %
// then 75 %/25 %; the first sample has no rate and is left out. The history is bounded.
func TestPageHistoryAndWriteShare(t *testing.T) {
	reg := fakeMongo("shop.<orders>", true, [][2]float64{{0, 0}, {10, 30}, {40, 40}})
	p := NewPage(reg, PageOptions{Interval: time.Second, Keep: 2, FloorBytes: 1 << 20})
	if got := render(t, p); !strings.Contains(got, "no sample yet") {
		t.Errorf("before the first sample: %s", got)
	}
	for range 3 {
		if err := p.Sample(); err != nil {
			t.Fatal(err)
		}
	}
	if len(p.hist.snaps) != 2 {
		t.Errorf("kept %d samples, want 2", len(p.hist.snaps))
	}
	// Keep 2 on a 406-pixel plot: ticks at 203 and 406; the rate 10/30 → 40/40 is 30/10.
	pan := p.hist.panel("shop.<orders>")
	if len(pan.Writes) != 2 || pan.Writes[0] != nil || pan.Writes[1][0] != 30 || pan.Writes[1][1] != 10 || pan.Data[1][0] != 3<<20 {
		t.Errorf("panel: data %v writes %v", pan.Data, pan.Writes)
	}
	page := render(t, p)
	for _, want := range []string{
		`<meta http-equiv="refresh" content="1">`,
		`<h3>shop.&lt;orders&gt;</h3>`, `aria-label="shop.&lt;orders&gt;"`, // escaped, in the heading and the chart
		`<b>HOT shard:</b> shop.&lt;orders&gt; on sh0 — HOT: 3.0 MiB ≥ 1.5 × 1.0 MiB`,
		"the balancer is off: start it with `shardmart mongo balancer start`",
		// The exact advise command for the hot collection, quoted for a shell, password left out.
		"`shardmart advise --from &#39;mongodb://admin@mongos:27017/?authSource=admin&#39; --collection &#39;shop.&lt;orders&gt;&#39;`",
		`<b>shard down:</b> sh&lt;2&gt;`,
		`balancer: <b>off</b> · in a balancing round: <b>no</b>`,
		`points="406.0,52.5"`, // sh0's write share, 75 % (30 of 40), at the last tick
		"writes per 1s (collStats latencyStats)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(page, "s3cret") {
		t.Error("the page shows the advise URI's password")
	}
	if n := strings.Count(page, "<svg"); n != 1 {
		t.Errorf("%d charts, want 1 (one namespace)", n)
	}
}

// Without per-collection counters the chart draws the shards' opcounters writes and says so.
func TestPageFallsBackToShardWrites(t *testing.T) {
	p := NewPage(fakeMongo("db.c", false, [][2]float64{{0, 0}, {5, 15}}), PageOptions{Interval: 15 * time.Second})
	for range 2 {
		if err := p.Sample(); err != nil {
			t.Fatal(err)
		}
	}
	page := render(t, p)
	for _, want := range []string{"ALL writes of the shard per 15s (opcounters)", `points="406.0,157.5"`, ">−1h<", ">−30m<", ">now<"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

func TestAgo(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "now", time.Hour: "−1h", 15 * time.Minute: "−15m", 90 * time.Second: "−1m30s"} {
		if got := ago(d); got != want {
			t.Errorf("ago(%s) = %q, want %q", d, got, want)
		}
	}
}

// The replication table: per member its set's oplog window, how far it is behind its primary,
// its headroom, and what the figures mean (past a staleness budget, fallen off the oplog).
func TestPageReplication(t *testing.T) {
	up := prometheus.NewDesc("shardmart_mongo_shard_up", "", []string{"shard"}, nil)
	window := prometheus.NewDesc("shardmart_mongo_oplog_window_seconds", "", []string{"set"}, nil)
	behind := prometheus.NewDesc("shardmart_mongo_member_behind_primary_seconds", "", []string{"set", "member"}, nil)
	headroom := prometheus.NewDesc("shardmart_mongo_member_oplog_headroom_seconds", "", []string{"set", "member"}, nil)
	reg := NewRegistry(Options{ScrapeTimeout: time.Second, Collectors: []Collector{
		collectorFunc{"mongo_fake", func(_ context.Context, ch chan<- prometheus.Metric) error {
			ch <- prometheus.MustNewConstMetric(up, prometheus.GaugeValue, 1, "sh0")
			ch <- prometheus.MustNewConstMetric(window, prometheus.GaugeValue, 7200, "sh0")
			for _, m := range []struct {
				member      string
				behind, hdr float64
			}{{"a:1", 0.25, 7199.75}, {"b:2", 7.5, 7192.5}, {"c:3", 42, 7158}, {"d:4", 7300, -100}} {
				ch <- prometheus.MustNewConstMetric(behind, prometheus.GaugeValue, m.behind, "sh0", m.member)
				ch <- prometheus.MustNewConstMetric(headroom, prometheus.GaugeValue, m.hdr, "sh0", m.member)
			}
			// A set whose window is unknown (its oplog unreadable): no headroom either.
			ch <- prometheus.MustNewConstMetric(behind, prometheus.GaugeValue, 0.5, "sh1", "e:5")
			return nil
		}},
	}})
	p := NewPage(reg, PageOptions{Interval: time.Second})
	if err := p.Sample(); err != nil {
		t.Fatal(err)
	}
	page := render(t, p)
	for _, want := range []string{
		`<tr><td>sh0</td><td class="n">2h0m0s</td><td>a:1</td><td class="n">0.2 s</td><td class="n">1h59m59s</td><td></td></tr>`,
		`<tr class="hot"><td>sh0</td><td class="n">2h0m0s</td><td>b:2</td><td class="n">7.5 s</td><td class="n">1h59m52s</td><td>behind past the 5 s budget: reads with it go to the primary</td></tr>`,
		`<td>c:3</td><td class="n">42.0 s</td><td class="n">1h59m18s</td><td>behind past both staleness budgets (5 s, 10 s): every budgeted read goes to the primary</td>`,
		`<td>d:4</td><td class="n">2h1m40s</td><td class="n">-1m40s</td><td>behind by more than the oplog window: it cannot catch up from the oplog and needs a full resync</td>`,
		`<tr><td>sh1</td><td class="n">?</td><td>e:5</td><td class="n">0.5 s</td><td class="n">?</td><td></td></tr>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
}
