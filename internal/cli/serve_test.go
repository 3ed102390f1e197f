package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestServeSeedsAndShutsDownGracefully runs the real serve path on a temp dir: it seeds the
// empty store, answers, and on cancel shuts the server down (http.Server.Shutdown) and returns.
func TestServeSeedsAndShutsDownGracefully(t *testing.T) {
	var o serveOptions
	o.backend.register(&cobra.Command{}) // fills the flag defaults
	o.backend.dataDir = t.TempDir()
	o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", true, "text", "short-token"
	o.shutdownTimeout, o.purgeEvery = 10*time.Second, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	var logs bytes.Buffer
	errc := make(chan error, 1)
	go func() { errc <- runServe(ctx, IO{Out: io.Discard, Err: &logs}, o, ready) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-errc:
		t.Fatalf("serve failed: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start")
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode >= 300 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	if !bytes.Contains(logs.Bytes(), []byte("demo data ready")) {
		t.Errorf("an empty store was not seeded; logs:\n%s", logs.String())
	}
	if bytes.Contains(logs.Bytes(), []byte("demo-password")) || !bytes.Contains(logs.Bytes(), []byte("password=")) {
		t.Errorf("demo password: want a random one logged once, not the published default; logs:\n%s", logs.String())
	}
	if !bytes.Contains(logs.Bytes(), []byte("the admin token is short")) {
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
