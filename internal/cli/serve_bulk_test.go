package cli

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/loadgen"
)

// The bulk user route is off unless serve is given --admin-bulk-users, which reaches the API.
func TestServeAdminBulkUsersFlag(t *testing.T) {
	if serveOptionsFor(t).bulkUsers {
		t.Error("--admin-bulk-users is on by default")
	}
	o := serveOptionsFor(t, "--admin-bulk-users")
	if !o.bulkUsers {
		t.Fatal("--admin-bulk-users did not turn the route on")
	}
	o.backend.register(&cobra.Command{})
	o.backend.dataDir = t.TempDir()
	o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", false, "text", "bulk-test-admin-token"
	o.shutdownTimeout, o.purgeEvery = 10*time.Second, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	ready, errc := make(chan string, 1), make(chan error, 1)
	go func() { errc <- runServe(ctx, IO{Out: io.Discard, Err: io.Discard}, o, ready) }()
	defer func() { cancel(); <-errc }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-errc:
		t.Fatalf("serve: %v", err)
	}
	body := map[string]any{"password": loadgen.BenchPassword, "users": []map[string]string{{"email": "flag@example.com"}}}
	req, err := loadgen.NewRequest(ctx, "POST", "http://"+addr+"/v1/admin/users", "", body, httpapi.AdminTokenHeader, o.adminToken)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /v1/admin/users on serve --admin-bulk-users: %d, want 200", resp.StatusCode)
	}
}
