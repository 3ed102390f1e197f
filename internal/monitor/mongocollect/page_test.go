package mongocollect_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/shardmart/shardmart/internal/monitor"
)

// hotPage serves the monitor's page for a real cluster in which one shard holds all of a
// collection (the balancer stopped), after two samples with inserts between them, so the write
// share has an interval to show.
func hotPage(t *testing.T) (srv *httptest.Server, ns, hot string) {
	t.Helper()
	c, r := cluster(t)
	ctx := ctxFor(t, 2*time.Minute)
	balancerOff(ctx, t, r)
	ns, hot = oneChunk(ctx, t, r, 2000, 1000)
	reg := exporter(t, c)
	page := monitor.NewPage(reg, 1<<20, 0, nil)
	if err := page.Sample(); err != nil {
		t.Fatal(err)
	}
	docs, _ := items(200, 1000)
	if _, err := r.Place(ctx, ns, docs); err != nil {
		t.Fatal(err)
	}
	if err := page.Sample(); err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewServer(monitor.Handler(reg, page))
	t.Cleanup(srv.Close)
	return srv, ns, hot
}

// MON-1: the page names the hot shard of the collection with the reason and what to do, shows
// the balancer off, and draws the collection's data and write shares.
func TestPageShowsHotShardBalancerAndShareChart(t *testing.T) {
	srv, ns, hot := hotPage(t)
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		"Hot shard <b>" + hot + "</b> for <b>" + ns + "</b>: HOT: ",
		"the balancer is off: start it with `shardmart mongo balancer start`",
		`Balancer: <b>off</b>`,
		"<div><b>" + ns + "</b></div><svg",
		`stroke-dasharray="4 3"`, // write share
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if resp, err := http.Get(srv.URL + "/metrics"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/metrics next to the page: %v %v", resp, err)
	}
}

// MON-1: the page in a real headless Chromium: it renders the hot shard's alert and the SVG
// share charts; the screenshot is kept (SHARDMART_SCREENSHOT_DIR names where to copy it).
func TestPageRendersInHeadlessChromium(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium not found: install the Debian package chromium (apt-get install chromium; .ci/run does it)")
	}
	srv, ns, hot := hotPage(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("headless", "new"), chromedp.WindowSize(1200, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Navigate(srv.URL+"/")); err != nil {
		t.Fatalf("chromium: navigate: %v", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.WaitVisible("#alerts")); err != nil {
		t.Fatalf("chromium: the alerts never showed: %v", err)
	}
	// Other tests' collections share the cluster: read every hot-shard alert as rendered.
	alerts, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll(".alert.hot")).map(e => e.innerText).join("\n")`))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	charts, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.chart polyline").length`))
	if err != nil {
		t.Fatal(err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(alerts, "Hot shard "+hot+" for "+ns) {
		t.Errorf("rendered alerts %q, want the hot shard %s of %s", alerts, hot, ns)
	}
	if charts == 0 {
		t.Error("no share chart rendered")
	}
	path := filepath.Join(t.TempDir(), "monitor-page.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("SHARDMART_SCREENSHOT_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "monitor-page.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s (%d bytes), %d polylines", path, len(shot), charts)
}
