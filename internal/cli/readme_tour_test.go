package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/serverproc"
)

// TestReadmeTourRuns runs the README's five-minute tour as a reader would: `make run` (the
// real serve command, its flags and environment, on an empty data directory and a free port
// instead of ./data and :8080), then the tour's shell block with bash, curl and jq. Each step
// must print what the README says it does, ending with the order marked paid.
func TestReadmeTourRuns(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README tour needs %s: %v", tool, err)
		}
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^run:\n\t\$\(GO\) run ./cmd/shardmart serve\n`).Match(mk) {
		t.Fatal("Makefile's run target is no longer `go run ./cmd/shardmart serve`: update this test and the README")
	}
	start, script := readmeTour(t)
	token := regexp.MustCompile(`^SHARDMART_ADMIN_TOKEN=(\S+) make run$`).FindStringSubmatch(start)
	if token == nil {
		t.Fatalf("the tour starts the server with %q, want SHARDMART_ADMIN_TOKEN=... make run", start)
	}
	t.Setenv("SHARDMART_ADMIN_TOKEN", token[1])

	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	var logs serverproc.Output
	stdio := IO{Out: io.Discard, Err: &logs}
	serve := newCmdServe(stdio, func(ctx context.Context, o serveOptions) error { return runServe(ctx, stdio, o, ready) })
	errc := make(chan error, 1)
	go func() {
		root := newRootCmd(stdio)
		root.AddCommand(serve)
		root.SetArgs([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", t.TempDir()})
		errc <- root.ExecuteContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	var api string
	select {
	case addr := <-ready:
		api = "http://" + addr
	case err := <-errc:
		t.Fatalf("serve failed: %v\n%s", err, logs.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("serve did not start")
	}
	eventually.NoError(t, 2*time.Minute, func() error {
		resp, err := http.Get(api + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz %d", resp.StatusCode)
		}
		return nil
	})

	if !strings.Contains(script, "API=http://localhost:8080\n") {
		t.Fatal("the tour no longer sets API=http://localhost:8080")
	}
	script = strings.Replace(script, "API=http://localhost:8080\n", "API="+api+"\n", 1)
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the tour failed: %v\n%s\nserver log:\n%s", err, out, logs.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("tour output:\n%s", out)
	// browse (3 items), cart, registration, the order read back, the status change.
	if len(lines) != 7 {
		t.Fatalf("the tour printed %d lines, want 7 (3 products, cart, user, order, status)", len(lines))
	}
	for i, want := range []string{`"id":"books-`, `"id":"books-`, `"id":"books-`, `"subtotal":"`, `{"email":"ann@example.com"}`, `"status":"created"`, `"status":"paid"`} {
		if !strings.Contains(lines[i], want) {
			t.Errorf("tour line %d = %s, want it to contain %s", i+1, lines[i], want)
		}
	}
}

// readmeTour returns the two shell blocks of the README's "Five-minute tour": the command
// that starts the server and the script run against it.
func readmeTour(t *testing.T) (start, script string) {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "\n## Five-minute tour\n")
	if i < 0 {
		t.Fatal(`README has no "Five-minute tour" section`)
	}
	section := readme[i+1:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) != 2 {
		t.Fatalf("the tour has %d sh blocks, want 2 (start the server, then the requests)", len(blocks))
	}
	return strings.TrimSpace(blocks[0][1]), blocks[1][1]
}
