package loadgen_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/loadgen"
)

// fakeTokens provisions no one: the share test draws requests without sending them.
func fakeTokens(_ context.Context, emails []string, _ string) ([]string, error) {
	tokens := make([]string, len(emails))
	for i := range tokens {
		tokens[i] = fmt.Sprintf("token-%d", i)
	}
	return tokens, nil
}

// userShares draws n requests of a prepared workload, handing each user back at once (as if
// answered), and answers the largest share of requests any one user sent.
func userShares(t *testing.T, cfg loadgen.Config, n int) float64 {
	t.Helper()
	s, err := loadgen.Prepare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for i := range n {
		op := s.Next(i)
		if op.User == "" {
			t.Fatalf("request %d (%s) names no user", i, op.Kind)
		}
		count[op.User]++
		if op.Dropped != nil {
			op.Dropped()
		}
	}
	top := 0
	for _, c := range count {
		top = max(top, c)
	}
	if len(count) < cfg.Users*9/10 {
		t.Errorf("%d of %d users sent anything", len(count), cfg.Users)
	}
	return float64(top) / float64(n)
}

// TestPopulationCapsEachUsersShare: over 200,000 requests of the population workload with
// 2,000 users, no user sends more than 1 % of them (an even share is 0.05 %), while the legacy
// workload's Zipf-skewed users put far more than 1 % on its most active one.
func TestPopulationCapsEachUsersShare(t *testing.T) {
	srv := apiServer(t)
	cfg := shopConfig(srv, loadgen.ScenarioMix)
	cfg.Workload, cfg.Users, cfg.Provision = loadgen.WorkloadPopulation, 2000, fakeTokens
	if top := userShares(t, cfg, 200_000); top > 0.01 {
		t.Errorf("population: the most active user sent %.2f %% of requests, want ≤ 1 %%", 100*top)
	} else {
		t.Logf("population: the most active user sent %.3f %% of requests", 100*top)
	}
	cfg.Workload, cfg.Users = loadgen.WorkloadLegacy, 200
	if top := userShares(t, cfg, 200_000); top <= 0.01 {
		t.Errorf("legacy: the most active user sent %.2f %% of requests, want the Zipf skew's > 1 %%", 100*top)
	} else {
		t.Logf("legacy: the most active user sent %.1f %% of requests", 100*top)
	}
}

// perUserInFlight wraps the API with a handler that delays every request by delay (so that
// requests overlap) and records, per bearer token, the most requests in flight at once.
type perUserInFlight struct {
	mu      sync.Mutex
	now     map[string]int
	highest map[string]int
}

func (p *perUserInFlight) wrap(next http.Handler, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get("Authorization")
		if tok != "" {
			p.mu.Lock()
			p.now[tok]++
			p.highest[tok] = max(p.highest[tok], p.now[tok])
			p.mu.Unlock()
			defer func() { p.mu.Lock(); p.now[tok]--; p.mu.Unlock() }()
		}
		time.Sleep(delay)
		next.ServeHTTP(w, r)
	})
}

func (p *perUserInFlight) most() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := 0
	for _, n := range p.highest {
		m = max(m, n)
	}
	return m
}

// TestOneRequestInFlightPerUser: 30 users send cart edits, checkouts and events at 600/s to
// a server that holds each request 3 ms. In the population workload no user ever has two
// requests at the server at once and none fails; in the legacy workload the most active user
// does (its events are not queued behind its cart), which is what this test would catch.
func TestOneRequestInFlightPerUser(t *testing.T) {
	api := apiServer(t)
	for _, tc := range []struct {
		workload string
		want     func(most int) bool
	}{
		{loadgen.WorkloadPopulation, func(most int) bool { return most == 1 }},
		{loadgen.WorkloadLegacy, func(most int) bool { return most > 1 }},
	} {
		t.Run(tc.workload, func(t *testing.T) {
			track := &perUserInFlight{now: map[string]int{}, highest: map[string]int{}}
			srv := httptest.NewServer(track.wrap(api.Config.Handler, 3*time.Millisecond))
			t.Cleanup(srv.Close)
			mix := loadgen.Mix{{Kind: loadgen.Cart, Share: 40}, {Kind: loadgen.Checkout, Share: 20}, {Kind: loadgen.Event, Share: 40}}
			// At most 20 requests in flight among 30 users: an idle user is always there.
			rep := runMix(t, srv, tc.workload, 30, mix, loadgen.Schedule{Rate: 600, Duration: time.Second, MaxInFlight: 20})
			if most := track.most(); !tc.want(most) {
				t.Errorf("%s: at most %d requests of one user at the server at once", tc.workload, most)
			}
			if tc.workload == loadgen.WorkloadPopulation && rep.Total.Failed != 0 {
				t.Errorf("%d requests failed (first: %s)", rep.Total.Failed, rep.Total.FirstError)
			}
		})
	}
}

// TestBusyPopulationDropsRequests: with 2 users and requests held 20 ms at 400/s, a request
// due while both users wait for an answer is not sent: it counts as dropped, says why, and
// makes the run behind, instead of reaching the server as a second request of a busy user.
func TestBusyPopulationDropsRequests(t *testing.T) {
	api := apiServer(t)
	track := &perUserInFlight{now: map[string]int{}, highest: map[string]int{}}
	srv := httptest.NewServer(track.wrap(api.Config.Handler, 20*time.Millisecond))
	t.Cleanup(srv.Close)
	rep := runMix(t, srv, loadgen.WorkloadPopulation, 2, loadgen.Mix{{Kind: loadgen.Event, Share: 1}},
		loadgen.Schedule{Rate: 400, Duration: 500 * time.Millisecond, MaxInFlight: 64})
	if rep.Total.Dropped == 0 || !rep.Behind || !strings.Contains(rep.Total.FirstError, "no idle user") || rep.Total.Failed != 0 {
		t.Errorf("dropped %d, behind %v, failed %d, first error %q; want drops for want of an idle user", rep.Total.Dropped,
			rep.Behind, rep.Total.Failed, rep.Total.FirstError)
	}
	if most := track.most(); most != 1 {
		t.Errorf("at most %d requests of one user at the server at once, want 1", most)
	}
}

// runMix runs mix from workload's users on srv at sched and returns the report.
func runMix(t *testing.T, srv *httptest.Server, workload string, users int, mix loadgen.Mix, sched loadgen.Schedule) loadgen.Report {
	t.Helper()
	cfg := shopConfig(srv, loadgen.ScenarioMix)
	cfg.Workload, cfg.Users, cfg.Mix = workload, users, mix
	ctx := context.Background()
	s, err := loadgen.Prepare(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := loadgen.Run(ctx, sched, s.Next)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
