package cli

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/loadgen"
)

// TestBenchFlags: the defaults are the SLO (p99 < 50 ms, errors < 1 %) and an
// unknown scenario or a rate of zero is refused before anything starts.
func TestBenchFlags(t *testing.T) {
	var got benchOptions
	run := func(args ...string) error {
		cmd := newCmdBench(IO{}, func(_ context.Context, o benchOptions) error { got = o; return nil })
		return execUnderRoot(t, cmd, append([]string{"bench"}, args...)...)
	}
	if err := run("--scenario", "flash-sale", "--find-max"); err != nil {
		t.Fatal(err)
	}
	if got.findMaxP99 != 50*time.Millisecond || got.loginP99 != 250*time.Millisecond || got.findMaxRule != findMaxPerType ||
		got.findMaxErrors != 0.01 || !got.findMax || got.scenario != "flash-sale" {
		t.Errorf("options: %+v", got)
	}
	// The population's 2,000 users by default; the legacy workload keeps its 200.
	if got.workload != loadgen.WorkloadPopulation || got.users != 2000 {
		t.Errorf("default workload %q, %d users; want population, 2000", got.workload, got.users)
	}
	if err := run("--workload", "legacy"); err != nil || got.users != 200 {
		t.Errorf("legacy: %d users (%v), want 200", got.users, err)
	}
	for _, args := range [][]string{{"--scenario", "black-friday"}, {"--rate", "0"}, {"--max-in-flight", "0"},
		{"--workload", "crowd"}, {"--find-max-rule", "average"}, {"--users", "-1"}} {
		if err := run(args...); err == nil {
			t.Errorf("bench %v accepted", args)
		}
	}
}

// TestBenchURLs: --url takes several processes, comma-separated or repeated.
func TestBenchURLs(t *testing.T) {
	var got benchOptions
	cmd := newCmdBench(IO{}, func(_ context.Context, o benchOptions) error { got = o; return nil })
	if err := execUnderRoot(t, cmd, "bench", "--url", "http://a:1,http://b:2", "--url", "http://c:3"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://a:1", "http://b:2", "http://c:3"}; !slices.Equal(got.urls, want) {
		t.Errorf("urls %q, want %q", got.urls, want)
	}
}

// TestBenchServerSeededBeforeReturning: the in-process server is handed to the workload only
// once its demo data is in, so the workload finds products at once (it used to be handed over
// as soon as it listened, and the README's bench command failed finding none).
func TestBenchServerSeededBeforeReturning(t *testing.T) {
	var o benchOptions
	cmd := newCmdBench(IO{}, func(_ context.Context, bo benchOptions) error { o = bo; return nil })
	if err := execUnderRoot(t, cmd, "bench"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	addr, _, stop, err := startBenchServer(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz once the bench server is handed over: %d, want 200", resp.StatusCode)
	}
	ids, err := loadgen.DiscoverProducts(ctx, http.DefaultClient, "http://"+addr, strings.Split(o.categories, ","), 100)
	if err != nil {
		t.Fatal(err)
	}
	// Every category of the bench is seeded: the demo's 5,000 products put over 100 in each of
	// the ten categories the bench browses, so each lists a full page of 100.
	if len(ids) != 10*100 {
		t.Errorf("found %d products in the bench's categories right after start, want them all seeded", len(ids))
	}
}
