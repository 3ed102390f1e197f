package loadgen_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/loadgen"
)

// kneeServer answers at once while it has seen at most knee requests in the last second, and
// after a long pause above that: a server whose latency collapses past a rate.
func kneeServer(t *testing.T, knee int, slow time.Duration) *httptest.Server {
	var mu sync.Mutex
	var arrivals []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		mu.Lock()
		arrivals = append(arrivals, now)
		i := 0
		for i < len(arrivals) && now.Sub(arrivals[i]) > time.Second {
			i++
		}
		arrivals = arrivals[i:]
		over := len(arrivals) > knee
		mu.Unlock()
		if over {
			time.Sleep(slow)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestFindMaxStopsAtTheKnee: 50, 100, 200 pass, 400 fails, the bisection's 300 fails too
// (above the knee of 280/s), so the answer is 200, and every step is reported in order.
func TestFindMaxStopsAtTheKnee(t *testing.T) {
	srv := kneeServer(t, 280, 500*time.Millisecond)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1000}}
	// A generous SLO: the steps below the knee must pass on a busy test machine too.
	fm := loadgen.FindMax{Start: 50, Factor: 2, Refine: 1, MaxP99: 200 * time.Millisecond, MaxErrorRate: 0.01}
	var seen []float64
	best, steps, err := fm.Run(context.Background(), func(ctx context.Context, rate float64) (loadgen.Report, error) {
		return loadgen.Run(ctx, loadgen.Schedule{Rate: rate, Duration: 2 * time.Second, MaxInFlight: 2000}, getOp(client, srv.URL))
	}, func(s loadgen.Step) { seen = append(seen, s.Rate) })
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{50, 100, 200, 400, 300}
	if len(steps) != len(want) || len(seen) != len(want) {
		t.Fatalf("steps %v, want %v", seen, want)
	}
	for i, s := range steps {
		if s.Rate != want[i] || seen[i] != want[i] || s.Pass != (want[i] <= 200) {
			t.Errorf("step %d: rate %v pass %v (%s), want rate %v pass %v", i, s.Rate, s.Pass, s.Why, want[i], want[i] <= 200)
		}
	}
	if best != 200 {
		t.Errorf("highest sustained rate %v, want 200", best)
	}
}

// TestFindMaxVerdict: each limit of the SLO fails a step on its own.
func TestFindMaxVerdict(t *testing.T) {
	fm := loadgen.FindMax{MaxP99: 50 * time.Millisecond, MaxErrorRate: 0.01}
	ok := loadgen.Report{TargetRate: 100, AchievedRate: 100, Total: loadgen.Stats{P99: 10, ErrorRate: 0}}
	if v := fm.Verdict(ok); v != "" {
		t.Errorf("a good step failed: %s", v)
	}
	for name, r := range map[string]loadgen.Report{
		"p99":    {TargetRate: 100, AchievedRate: 100, Total: loadgen.Stats{P99: 50}},
		"errors": {TargetRate: 100, AchievedRate: 100, Total: loadgen.Stats{P99: 1, ErrorRate: 0.01}},
		"behind": {TargetRate: 100, AchievedRate: 80, Behind: true, Total: loadgen.Stats{P99: 1}},
	} {
		if fm.Verdict(r) == "" {
			t.Errorf("%s: a failing step passed", name)
		}
	}
}
