package httpapi

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/placement"
)

// TestDevServer runs the API for manual checks (the README's curl walk-through) until
// SIGINT/SIGTERM, wired as serve wires it, on a temp SQLite file:
//
//	SHARDMART_DEV_LISTEN=127.0.0.1:8080 go test -run TestDevServer -timeout 0 ./internal/httpapi/
//
// The admin token is "dev-admin-token". Skipped unless SHARDMART_DEV_LISTEN is set.
func TestDevServer(t *testing.T) {
	addr := os.Getenv("SHARDMART_DEV_LISTEN")
	if addr == "" {
		t.Skip("SHARDMART_DEV_LISTEN not set: no dev server")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := placement.Open(ctx, placement.Embedded(), placement.Options{SQLitePath: filepath.Join(t.TempDir(), "dev.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	d, projector := wire(s, "dev-admin-token", logger)
	go projector.Run(ctx, time.Second)
	h := New(d)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("dev server listening", "addr", ln.Addr().String())
	if err := Serve(ctx, ln, h, 10*time.Second, logger); err != nil {
		t.Fatal(err)
	}
}
