package loadgen_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/loadgen"
)

// With the admin token and the server's bulk route on, the bench's 2,000 users are created
// through it and logged in: every token is a distinct working session.
func TestProvisionThroughTheBulkRoute(t *testing.T) {
	srv := apiServerWith(t, httpapi.Deps{BulkUsers: true})
	cfg := shopConfig(srv, loadgen.ScenarioMix)
	cfg.Workload, cfg.Users = loadgen.WorkloadPopulation, 2000
	var log strings.Builder
	cfg.Log = &log
	s, err := loadgen.Prepare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "created 2000/2000 users through the bulk route") || strings.Contains(log.String(), "one by one") {
		t.Errorf("the users were not created through the bulk route:\n%s", log.String())
	}
	if strings.Contains(log.String(), "logged in") {
		t.Errorf("users created through the bulk route were logged in one by one, not given the route's sessions:\n%s", log.String())
	}
	assertWorkingSessions(t, srv, s.Tokens(), cfg.Users)
}

// Without the route on, the users are registered one by one, and the log says why.
func TestProvisionFallsBackWithoutTheBulkRoute(t *testing.T) {
	srv := apiServer(t)
	cfg := shopConfig(srv, loadgen.ScenarioMix)
	var log strings.Builder
	cfg.Log = &log
	s, err := loadgen.Prepare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "registering the users one by one instead") {
		t.Errorf("the fallback was not reported:\n%s", log.String())
	}
	assertWorkingSessions(t, srv, s.Tokens(), cfg.Users)
}

// assertWorkingSessions: want distinct tokens, each a session logged in as a user (GET
// /v1/orders answers only those).
func assertWorkingSessions(t *testing.T, srv *httptest.Server, tokens []string, want int) {
	t.Helper()
	if len(tokens) != want {
		t.Fatalf("%d tokens, want %d", len(tokens), want)
	}
	seen := map[string]bool{}
	for i, tok := range tokens {
		if tok == "" || seen[tok] {
			t.Fatalf("token %d: %q empty or repeated", i, tok)
		}
		seen[tok] = true
		req, err := loadgen.NewRequest(context.Background(), "GET", srv.URL+"/v1/orders", tok, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("user %d's session: GET /v1/orders %d, want 200", i, resp.StatusCode)
		}
	}
}
