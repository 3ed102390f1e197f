package cli

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/eventually"
)

// TestServeSaysWhenItsCacheIsBehind: a process whose outbox tail is further behind than
// --cache-staleness (here a bound no poll can meet) answers /readyz 503 saying why, exports
// shardmart_card_cache_bypassed 1, and still serves search (from the store).
func TestServeSaysWhenItsCacheIsBehind(t *testing.T) {
	var o serveOptions
	o.backend.register(&cobra.Command{})
	o.backend.dataDir = t.TempDir()
	o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", false, "text", "stale-test-admin-token-0123456789ab"
	o.shutdownTimeout, o.purgeEvery, o.cacheStaleness = 10*time.Second, time.Hour, time.Nanosecond
	ctx, cancel := context.WithCancel(context.Background())
	ready, errc := make(chan string, 1), make(chan error, 1)
	go func() { errc <- runServe(ctx, IO{Out: io.Discard, Err: io.Discard}, o, ready) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}()
	var api string
	select {
	case addr := <-ready:
		api = "http://" + addr
	case err := <-errc:
		errc <- nil
		t.Fatalf("serve: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start")
	}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(api + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually.True(t, 10*time.Second, "/readyz 503 naming the search cache", func() bool {
		code, body := get("/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "search cache is not following")
	})
	if _, body := get("/metrics"); !strings.Contains(body, "\nshardmart_card_cache_bypassed 1\n") {
		t.Errorf("/metrics lacks shardmart_card_cache_bypassed 1")
	}
	if code, body := get("/v1/products?category=kitchen&limit=5"); code != http.StatusOK {
		t.Errorf("search while the cache is bypassed: %d %s, want 200", code, body)
	}
}
