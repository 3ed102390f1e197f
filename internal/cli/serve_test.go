package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/serverproc"
)

// TestServeSeedsAndShutsDownGracefully runs the real serve path on a temp dir: it listens at
// once, answers /readyz 503 (problem+json, with the seeding progress) while it seeds the empty
// store and 200 once the data is in, serves other routes meanwhile, and on cancel shuts down
// (http.Server.Shutdown) and returns. The seed is held at its first step until the test has
// seen the 503, so the test never races it.
func TestServeSeedsAndShutsDownGracefully(t *testing.T) {
	var o serveOptions
	o.backend.register(&cobra.Command{}) // fills the flag defaults
	o.backend.dataDir = t.TempDir()
	o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", true, "text", "short-token"
	o.shutdownTimeout, o.purgeEvery = 10*time.Second, 50*time.Millisecond
	o.demo = demo.Defaults()
	o.demo.Products, o.demo.Users = 1200, 40
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	o.demo.OnProgress = func(string, int, int) { once.Do(func() { close(reached); <-release }) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	var logs serverproc.Output
	errc := make(chan error, 1)
	go func() { errc <- runServe(ctx, IO{Out: io.Discard, Err: &logs}, o, ready) }()
	var api string
	select {
	case addr := <-ready:
		api = "http://" + addr
	case err := <-errc:
		t.Fatalf("serve failed: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start")
	}
	get := func(path string) (int, string, map[string]any) {
		t.Helper()
		resp, err := http.Get(api + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), body
	}
	if code, _, body := get("/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz as soon as serve listens: %d %v, want 503", code, body)
	}
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatal("the seed made no progress")
	}

	code, ctype, body := get("/readyz")
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(ctype, "application/problem+json") ||
		!strings.Contains(body["detail"].(string), "seeding demo data: products") {
		t.Errorf("/readyz while seeding: %d %s %v; want 503 problem+json saying how far seeding is", code, ctype, body)
	}
	if code, _, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while seeding: %d, want 200 (the process is alive)", code)
	}
	// Requests are served during seeding; reads see whatever is in so far (here: the first chunk).
	if code, _, _ := get("/v1/products?category=electronics&limit=5"); code != http.StatusOK {
		t.Errorf("search while seeding: %d, want 200", code)
	}
	close(release)
	eventually.NoError(t, 60*time.Second, func() error {
		if code, _, body := get("/readyz"); code != http.StatusOK {
			return fmt.Errorf("/readyz still %d %v; logs:\n%s", code, body, logs.String())
		}
		return nil
	})
	if !strings.Contains(logs.String(), "demo data ready") {
		t.Errorf("ready before the seed said it was done; logs:\n%s", logs.String())
	}
	if code, _, body := get("/v1/products/electronics-00000"); code != http.StatusOK {
		t.Errorf("a seeded product after ready: %d %v", code, body)
	}
	// The projector has passed every seeded row: the scheduled prune empties the outbox, and
	// the metrics say so.
	eventually.NoError(t, 30*time.Second, func() error {
		resp, err := http.Get(api + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		m := string(b)
		if strings.Contains(m, "\nshardmart_outbox_rows 0\n") && strings.Contains(m, "\nshardmart_outbox_oldest_unconsumed_age_seconds 0\n") {
			return nil
		}
		return fmt.Errorf("the outbox was not pruned after the seed; metrics:\n%s\nlogs:\n%s", grepLines(m, "shardmart_outbox"), logs.String())
	})
	if !strings.Contains(logs.String(), "pruned outbox") {
		t.Errorf("no prune logged; logs:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "demo-password") || !strings.Contains(logs.String(), "password=") {
		t.Errorf("demo password: want a random one logged once, not the published default; logs:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "the admin token is short") {
		t.Errorf("an 11-character admin token was taken without a warning; logs:\n%s", logs.String())
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("shutdown: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop after cancel")
	}
}

// TestServeShutsDownDuringSeeding: a SIGTERM while the seed runs stops the seed and the server
// promptly and cleanly, saying the data is partial.
func TestServeShutsDownDuringSeeding(t *testing.T) {
	var o serveOptions
	o.backend.register(&cobra.Command{})
	o.backend.dataDir = t.TempDir()
	o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", true, "text", strings.Repeat("a", 32)
	o.shutdownTimeout, o.purgeEvery = 10*time.Second, 50*time.Millisecond
	o.demo = demo.Defaults()
	o.demo.Products, o.demo.Users = 1200, 400
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	usersStarted := make(chan struct{})
	var once sync.Once
	o.demo.OnProgress = func(stage string, _, _ int) {
		if stage == "users" {
			once.Do(func() { close(usersStarted) })
		}
	}
	var logs serverproc.Output
	errc := make(chan error, 1)
	go func() { errc <- runServe(ctx, IO{Out: io.Discard, Err: &logs}, o, nil) }()
	select {
	case <-usersStarted:
	case err := <-errc:
		t.Fatalf("serve ended early: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatal("seeding never reached the users")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("shutdown during seeding: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop after cancel during seeding")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("shutdown during seeding took %s", d)
	}
	if !strings.Contains(logs.String(), "seeding interrupted by shutdown") {
		t.Errorf("an interrupted seed was not reported; logs:\n%s", logs.String())
	}
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSecondServeOnOneDataDirIsRefused: the embedded store takes one serve process; a second
// on the same data directory stops at start naming the directory and the holder's pid, and
// the directory is free again once the first has stopped.
func TestSecondServeOnOneDataDirIsRefused(t *testing.T) {
	dir := t.TempDir()
	start := func() (chan error, chan string, context.CancelFunc) {
		var o serveOptions
		o.backend.register(&cobra.Command{})
		o.backend.dataDir = dir
		o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", false, "text", "lock-test-admin-token-0123456789ab"
		o.shutdownTimeout, o.purgeEvery = 10*time.Second, time.Hour
		ctx, cancel := context.WithCancel(context.Background())
		ready, errc := make(chan string, 1), make(chan error, 1)
		go func() { errc <- runServe(ctx, IO{Out: io.Discard, Err: io.Discard}, o, ready) }()
		return errc, ready, cancel
	}
	errc, ready, stop := start()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("first serve: %v", err)
	}
	errc2, _, stop2 := start()
	defer stop2()
	select {
	case err := <-errc2:
		if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), fmt.Sprintf("process %d", os.Getpid())) {
			t.Errorf("second serve on %s: %v; want a refusal naming the directory and process %d", dir, err, os.Getpid())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second serve on one data directory started")
	}
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	errc3, ready3, stop3 := start()
	select {
	case <-ready3:
	case err := <-errc3:
		stop3()
		t.Fatalf("serve after the first stopped: %v", err)
	}
	// Wait for it to close its store, or the data directory is removed under it.
	stop3()
	if err := <-errc3; err != nil {
		t.Fatal(err)
	}
}
