package monitor_test

// The page on a real cluster: a config server and two shards (mongod 6.0.5, one member each,
// chunk size 1 MB, no mongos) on this package's own ports, started on first use. The exporter
// is given the config server's URI; shardtest.Router places documents as mongos would route
// them. The browser test loads the same page in real headless Chromium.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/mongodb/shardtest"
	"github.com/shardmart/shardmart/internal/monitor"
	"github.com/shardmart/shardmart/internal/monitor/mongocollect"
	"github.com/shardmart/shardmart/internal/sharding"
)

var live = shardtest.Shared{Opts: launcher.ClusterOptions{Shards: 2, BasePort: launcher.MonitorPageTestPort, ChunkSizeMB: 1}}

func TestMain(m *testing.M) {
	code := m.Run()
	live.Stop()
	os.Exit(code)
}

// scene is the cluster's state that both page tests look at, built once.
type scene struct {
	reg       *prometheus.Registry // behind /metrics and the page
	page      *monitor.Page
	hot, cool string // namespaces: all data on one shard / spread over both
	hotShard  string
	err       error
}

var (
	sceneOnce sync.Once
	theScene  *scene
)

// liveScene stops the balancer (for good: the cluster dies with the binary), shards
// page.orders on a range key (its one chunk stays on the database's primary shard: hot) and
// page.carts on a hashed key (presplit over both shards), and samples the page six times with
// inserts into both in between, so each chart has a history of data and write shares.
func liveScene(t *testing.T) *scene {
	t.Helper()
	c, r := live.Get(t)
	sceneOnce.Do(func() {
		s := &scene{hot: "page.orders", cool: "page.carts"}
		theScene = s
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s.err = func() error {
			if _, err := sharding.StopBalancer(ctx, r, time.Minute, 250*time.Millisecond, io.Discard); err != nil {
				return err
			}
			if err := r.ShardCollection(ctx, s.hot, bson.D{{Key: "k", Value: 1}}); err != nil {
				return err
			}
			if err := r.ShardCollection(ctx, s.cool, bson.D{{Key: "k", Value: "hashed"}}); err != nil {
				return err
			}
			mc, err := mongocollect.Open(mongocollect.Options{URI: c.ConfigURI(), ChunkMoveWindow: time.Hour})
			if err != nil {
				return err
			}
			// Not closed: its clients end with the test binary, like the cluster.
			s.reg = monitor.NewRegistry(monitor.Options{Collectors: mc.Collectors(), ScrapeTimeout: 10 * time.Second, HotFloorBytes: 1 << 20})
			s.page = monitor.NewPage(s.reg, monitor.PageOptions{Interval: 15 * time.Second, Keep: 12, FloorBytes: 1 << 20})
			pad := strings.Repeat("x", 1000)
			for i := range 6 {
				orders := make([]bson.D, 400)
				carts := make([]bson.D, 40*(i+1))
				for j := range orders {
					orders[j] = bson.D{{Key: "k", Value: int32(i*1000 + j)}, {Key: "pad", Value: pad}}
				}
				for j := range carts {
					carts[j] = bson.D{{Key: "k", Value: int32(i*1000 + j)}, {Key: "pad", Value: pad}}
				}
				placed, err := r.Place(ctx, s.hot, orders)
				if err != nil || len(placed) != 1 {
					return fmt.Errorf("place %s: %v, %w (want all on one shard)", s.hot, placed, err)
				}
				for sh := range placed {
					s.hotShard = sh
				}
				if _, err := r.Place(ctx, s.cool, carts); err != nil {
					return fmt.Errorf("place %s: %w", s.cool, err)
				}
				if err := s.page.Sample(); err != nil {
					return err
				}
			}
			return nil
		}()
	})
	if theScene.err != nil {
		t.Fatal(theScene.err)
	}
	return theScene
}

func get(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d", path, rec.Code)
	}
	return rec.Body.String()
}

// The page served by monitor.Handler from real scrapes names the hot shard, why and what to do,
// the balancer's state, and draws one chart per sharded collection; /metrics still works.
func TestPageOnRealCluster(t *testing.T) {
	s := liveScene(t)
	h := monitor.Handler(s.reg, s.page)
	page := get(t, h, "/")
	for _, want := range []string{
		"<b>HOT shard:</b> " + s.hot + " on " + s.hotShard + " — HOT: 2.",
		"(mean of the other shards) and ≥ the 1.0 MiB floor",
		s.hot + " is hot on " + s.hotShard + " (100% of its data): the balancer is off: start it with `shardmart mongo balancer start`",
		`balancer: <b>off</b> · in a balancing round: <b>no</b>`,
		"writes per 15s (collStats latencyStats)", // the per-collection write counters are there: no fallback
		`<h3>Recent chunk moves`,
		`<table id="replication">`, // the shards are 1-member sets: one row each, its own primary
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "HOT shard:</b> "+s.cool) {
		t.Errorf("%s (hashed, on both shards) reported hot", s.cool)
	}
	namespaces := strings.Count(page, "<h3>") - 2 // the chunk moves and replication headings are the others
	if charts := strings.Count(page, `<svg xmlns="http://www.w3.org/2000/svg" class="sharechart"`); charts != namespaces || charts < 2 {
		t.Errorf("%d charts for %d collections, want one each (at least %s and %s)", charts, namespaces, s.hot, s.cool)
	}
	for _, ns := range []string{s.hot, s.cool} {
		if !strings.Contains(page, `aria-label="`+ns+`"`) {
			t.Errorf("no chart of %s", ns)
		}
	}
	if m := get(t, h, "/metrics"); !strings.Contains(m, `shardmart_mongo_collection_data_bytes{namespace="`+s.hot+`"`) {
		t.Error("/metrics lacks the data bytes of " + s.hot)
	}
}

// run runs one browser action for its value, failing the test on error.
func run[T any](ctx context.Context, t *testing.T, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// MON-1: the page in real headless Chromium (Debian package `chromium`): it renders, the DOM holds the
// hot shard's alert and the SVG charts with their lines, and a screenshot is taken (to the test's
// temp dir, and to $SHARDMART_SCREENSHOT_DIR when set).
func TestPageInHeadlessChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not found: install the Debian package chromium (apt-get install chromium; .ci/run does it)")
	}
	s := liveScene(t)
	srv := httptest.NewServer(monitor.Handler(s.reg, s.page))
	t.Cleanup(srv.Close)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin),
		chromedp.Flag("headless", "new"), chromedp.NoSandbox, // root in CI: Chromium refuses its sandbox
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1200, 800))
	// The deadline is the browser's whole life: it is killed when the time is up.
	deadline, cancelT := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancelT()
	actx, cancelAlloc := chromedp.NewExecAllocator(deadline, opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancel()

	version, err := chromedp.CallBrowser(ctx, browser.GetVersion, cdp.Empty{})
	if err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1200, 800),
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#alerts li.hot")),
	); err != nil {
		t.Fatalf("load the page in %s: %v", version.Product, err)
	}
	alerts := run(ctx, t, chromedp.Text(chromedp.CSS("#alerts")))
	balancer := run(ctx, t, chromedp.Text(chromedp.CSS("#balancer")))
	charts := run(ctx, t, chromedp.Evaluate[int](`document.querySelectorAll("svg.sharechart").length`))
	lines := run(ctx, t, chromedp.Evaluate[int](`document.querySelectorAll("svg.sharechart polyline").length`))
	chartWidth := run(ctx, t, chromedp.Evaluate[float64](`document.querySelector("svg.sharechart").getBoundingClientRect().width`))
	png := run(ctx, t, chromedp.CaptureScreenshot())
	product := version.Product
	t.Logf("browser %s: %d charts, %d lines", product, charts, lines)
	if want := "HOT shard: " + s.hot + " on " + s.hotShard; !strings.Contains(alerts, want) || !strings.Contains(alerts, "balancer start") {
		t.Errorf("alerts as rendered: %q, want %q and the advice", alerts, want)
	}
	if !strings.Contains(balancer, "balancer: off") {
		t.Errorf("balancer as rendered: %q", balancer)
	}
	if charts < 2 || lines < 2*2*charts || chartWidth < 400 {
		t.Errorf("%d charts, %d lines, first %.0f px wide: want ≥ 2 charts of 2 shards × data and writes, drawn full size", charts, lines, chartWidth)
	}
	shot := filepath.Join(t.TempDir(), "monitor-page.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("SHARDMART_SCREENSHOT_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "monitor-page.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
}
