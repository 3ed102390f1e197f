package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// SchemathesisVersion is the Schemathesis release .ci/run installs into the cache directory.
const SchemathesisVersion = "4.32.5"

// schemathesisBin is the st command of the pinned release: $SHARDMART_CACHE_DIR (default
// ~/.cache/shardmart)/schemathesis-<version>/bin/st. Missing, the test fails saying how to
// install it: a fuzzer that did not run is never a pass.
func schemathesisBin(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(serverproc.CacheDir(), "schemathesis-"+SchemathesisVersion)
	bin := filepath.Join(dir, "bin", "st")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("Schemathesis %s is not installed (%v); .ci/run installs it, or by hand:\n"+
			"  python3 -m venv %s && %s/bin/pip install schemathesis==%s\n(Python 3.12 or later)",
			SchemathesisVersion, err, dir, dir, SchemathesisVersion)
	}
	return bin
}

// TestSchemathesis runs Schemathesis, a schema-driven fuzzer independent of this repository,
// against the served /openapi.json with every check it has (server errors, status codes,
// content types, headers and bodies against the document, schema-valid requests accepted,
// schema-invalid ones rejected, authentication not ignored, and the stateful phase following
// the document's links), once as a logged-in user and once also holding the admin token. Any
// failure fails the test with Schemathesis's report, which carries a curl command for each.
//
// It runs on the embedded SQLite store with a small catalog and one placed order, in
// Schemathesis's deterministic mode with a bounded number of examples per operation.
// testdata/schemathesis/shardmart_hooks.py gives each case a session of its own (a generated
// logout or login revokes the token it is sent with) and a generator for the cursor format.
func TestSchemathesis(t *testing.T) {
	bin := schemathesisBin(t)
	hooks, err := filepath.Abs(filepath.Join("testdata", "schemathesis"))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvWith(t, func(d *Deps) { d.BulkUsers = true })
	for i, cat := range []string{"0", "mugs", "mugs", "tea"} {
		e.product(t, fmt.Sprintf("fz-%d", i), cat, "12.50", 1000)
	}
	guest := e.guest(t)
	const email, password = "fuzz@example.com", "password123"
	e.must(t, http.StatusCreated, req{method: "POST", path: "/v1/users", token: guest,
		body: map[string]string{"email": email, "password": password}})
	user := e.login(t, guest, email, password)
	e.put(t, user, "fz-1", 1)
	if r := e.placeOrder(t, user, "fz-order"); r.status != http.StatusCreated {
		t.Fatalf("place the fixture order: %d %s", r.status, r.body)
	}

	// The user runs every operation a session may call; the admin run, holding the admin token
	// too, the admin operations (their 401 and 403 without it are asserted in api_test.go).
	var adminOps, userOps []string
	doc := loadDoc(t, e.must(t, http.StatusOK, req{method: "GET", path: "/openapi.json"}).body)
	for _, op := range doc.operations(t) {
		if slices.Contains(op.security, "admin") {
			adminOps = append(adminOps, "--include-operation-id", op.id)
			userOps = append(userOps, "--exclude-operation-id", op.id)
		}
	}
	if len(adminOps) == 0 {
		t.Fatal("the document secures no operation with the admin token")
	}
	for _, run := range []struct {
		name  string
		admin bool
		ops   []string
	}{{"user", false, userOps}, {"admin", true, adminOps}} {
		t.Run(run.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			args := []string{"run", e.srv.URL + "/openapi.json",
				"--checks", "all",
				"--max-examples", "25",
				"--seed", "20261128",
				"--generation-database", "none",
				"--workers", "2",
				"--no-color",
			}
			args = append(args, run.ops...)
			if run.admin {
				args = append(args, "--header", AdminTokenHeader+": "+testAdminToken)
			}
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Dir = t.TempDir() // anything it writes stays out of the repository
			cmd.Env = append(os.Environ(),
				"PYTHONPATH="+hooks,
				"SCHEMATHESIS_HOOKS=shardmart_hooks",
				"SHARDMART_FUZZ_URL="+e.srv.URL,
				"SHARDMART_FUZZ_EMAIL="+email,
				"SHARDMART_FUZZ_PASSWORD="+password,
			)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("schemathesis %s as %s: %v after %s\n%s", SchemathesisVersion, run.name, err, time.Since(start).Round(time.Second), out)
			}
			summary := ""
			for line := range strings.Lines(string(out)) {
				if strings.Contains(line, " generated, ") {
					summary = strings.TrimSpace(line)
				}
			}
			t.Logf("schemathesis %s as %s: no failure in %s (%s)", SchemathesisVersion, run.name, time.Since(start).Round(time.Second), summary)
		})
	}
}
