package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/loadgen"
)

// TestBenchFlags: the defaults are the SLO (p99 < 50 ms, errors < 1 %) and an
// unknown scenario, a rate of zero or a CPU profile of several runs is refused before anything
// starts.
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
	if !slices.Equal(got.workloads, []string{loadgen.WorkloadPopulation}) || got.usersFor(loadgen.WorkloadPopulation) != 2000 ||
		got.usersFor(loadgen.WorkloadLegacy) != 200 {
		t.Errorf("default workloads %q, %d and %d users; want population, 2000 (legacy 200)", got.workloads,
			got.usersFor(loadgen.WorkloadPopulation), got.usersFor(loadgen.WorkloadLegacy))
	}
	// Several placements and workloads alternate in one run; a placement's value keeps its commas.
	if err := run("--workload", "population,legacy", "--placement", "embedded", "--placement", "carts=cassandra,sessions=cassandra"); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.workloads, []string{"population", "legacy"}) || !slices.Equal(got.placements, []string{"embedded", "carts=cassandra,sessions=cassandra"}) {
		t.Errorf("workloads %q, placements %q", got.workloads, got.placements)
	}
	// A CPU profile is of one fixed-rate run.
	if err := run("--cpu-profile", "bench.prof", "--rate", "300"); err != nil || got.cpuProfile != "bench.prof" {
		t.Errorf("--cpu-profile bench.prof: %v, got %q", err, got.cpuProfile)
	}
	for _, args := range [][]string{{"--scenario", "black-friday"}, {"--rate", "0"}, {"--max-in-flight", "0"},
		{"--workload", "crowd"}, {"--find-max-rule", "average"}, {"--users", "-1"}, {"--rounds", "0"},
		{"--url", "http://a:1", "--placement", "mongo"}, {"--cpu-profile", "p", "--find-max"}, {"--cpu-profile", "p", "--rounds", "2"},
		{"--cpu-profile", "p", "--workload", "population,legacy"}, {"--cpu-profile", "p", "--placement", "embedded", "--placement", "mongo"}} {
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
	addr, _, stop, err := startBenchServer(ctx, o, "")
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

// TestBenchAlternatesWorkloadsStepByStep: with two workloads, find-max takes each one's steps
// in turn (population 20/s, legacy 20/s, then 40/s each for those that passed) on the same
// in-process server, and the JSON report has both, each step with the CPU per request of the
// bench process.
func TestBenchAlternatesWorkloadsStepByStep(t *testing.T) {
	var o benchOptions
	cmd := newCmdBench(IO{}, func(_ context.Context, bo benchOptions) error { o = bo; return nil })
	if err := execUnderRoot(t, cmd, "bench", "--find-max", "--rate", "20", "--find-max-factor", "2", "--find-max-limit", "40", "--find-max-refine", "0",
		"--duration", "400ms", "--warmup", "0s", "--users", "40", "--workload", "population,legacy", "--json",
		"--find-max-p99", "10m", "--find-max-login-p99", "10m", "--find-max-errors", "1"); err != nil {
		t.Fatal(err)
	}
	var out, log strings.Builder
	if err := runBench(context.Background(), IO{Out: &out, Err: &log}, o); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var doc benchComparisonJSON
	if err := json.Unmarshal([]byte(out.String()), &doc); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(doc.Arms) != 2 || doc.Arms[0].Workload != loadgen.WorkloadPopulation || doc.Arms[1].Workload != loadgen.WorkloadLegacy {
		t.Fatalf("arms: %+v", doc.Arms)
	}
	var want []string
	for round, rate := range []string{"20/s", "40/s"} {
		for _, a := range doc.Arms {
			if len(a.Steps) > round {
				want = append(want, rate+" "+a.Workload)
			}
		}
	}
	for _, a := range doc.Arms {
		// A step that fails (this machine's load can put a 400 ms window behind) ends the climb.
		if len(a.Steps) == 0 || a.Steps[0].Rate != 20 || (len(a.Steps) == 2) != a.Steps[0].Pass || a.Users != 40 {
			t.Errorf("%s: %d users, steps %+v; want 40 users, 20/s then 40/s if 20/s passed", a.Workload, a.Users, a.Steps)
			continue
		}
		for _, st := range a.Steps {
			if cpu := st.Report.CPU; len(cpu) != 1 || cpu[0].PID != 0 || cpu[0].PerRequestMS <= 0 {
				t.Errorf("%s at %.0f/s: CPU %+v, want the bench process's per request", a.Workload, st.Rate, cpu)
			}
		}
	}
	var order []string
	for _, line := range strings.Split(log.String(), "\n") {
		for _, w := range loadgen.Workloads {
			if strings.HasPrefix(line, "step ") && strings.Contains(line, w+" workload") {
				order = append(order, strings.Fields(line)[1]+" "+w)
			}
		}
	}
	if !slices.Equal(order, want) {
		t.Errorf("steps in the order %q, want %q\n%s", order, want, log.String())
	}
}
