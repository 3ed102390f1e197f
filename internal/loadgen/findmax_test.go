package loadgen_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/loadgen"
)

// kneeTarget is a target whose step at a rate passes below knee and fails above it by its p99
// (a server whose latency collapses past a rate), as a function of the rate alone: the search
// is what is tested here, and a real run's latency on a shared test machine depends on that
// machine's load as much as on the rate. The open-loop runs themselves are tested in
// openloop_test.go.
func kneeTarget(knee float64) func(ctx context.Context, rate float64) (loadgen.Report, error) {
	return func(ctx context.Context, rate float64) (loadgen.Report, error) {
		p99 := 2.0 // ms
		if rate > knee {
			p99 = 500
		}
		n := int64(rate * 2) // a 2 s step
		st := loadgen.Stats{Type: "total", Scheduled: n, Sent: n, OK: n, Rate: rate, P50: 1, P99: p99}
		typ := st
		typ.Type = loadgen.Browse
		return loadgen.Report{TargetRate: rate, AchievedRate: rate, DurationS: 2, Total: st, Types: []loadgen.Stats{typ}}, ctx.Err()
	}
}

// TestFindMaxStopsAtTheKnee: 50, 100, 200 pass, 400 fails, the bisection's 300 fails too
// (above the knee of 280/s), so the answer is 200, and every step is reported in order.
func TestFindMaxStopsAtTheKnee(t *testing.T) {
	fm := loadgen.FindMax{Start: 50, Factor: 2, Refine: 1, MaxP99: 200 * time.Millisecond, MaxErrorRate: 0.01}
	var seen []float64
	best, steps, err := fm.Run(context.Background(), kneeTarget(280), func(s loadgen.Step) { seen = append(seen, s.Rate) })
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{50, 100, 200, 400, 300}
	if len(steps) != len(want) || len(seen) != len(want) {
		t.Fatalf("steps %v, want %v", seen, want)
	}
	for i, s := range steps {
		if s.Rate != want[i] || seen[i] != want[i] || s.Pass != (want[i] <= 200) || (s.Why == "") != s.Pass {
			t.Errorf("step %d: rate %v pass %v (%s), want rate %v pass %v", i, s.Rate, s.Pass, s.Why, want[i], want[i] <= 200)
		}
	}
	if best != 200 {
		t.Errorf("highest sustained rate %v, want 200", best)
	}
	// Refining longer bisects on: 300 fails, 250 passes, 275 passes.
	fm.Refine = 3
	best, steps, err = fm.Run(context.Background(), kneeTarget(280), nil)
	if err != nil || best != 275 || len(steps) != 7 {
		t.Errorf("refine 3: best %v after %d steps (%v), want 275 after 7", best, len(steps), err)
	}
}

// TestFindMaxVerdict: each limit of the SLO fails a step on its own.
func TestFindMaxVerdict(t *testing.T) {
	fm := loadgen.FindMax{MaxP99: 50 * time.Millisecond, MaxErrorRate: 0.01}
	ok := loadgen.Report{TargetRate: 100, AchievedRate: 100, Total: loadgen.Stats{P99: 10, ErrorRate: 0},
		Types: []loadgen.Stats{{Type: loadgen.Cart, P99: 10}}}
	if v := fm.Verdict(ok); v != "" {
		t.Errorf("a good step failed: %s", v)
	}
	for name, r := range map[string]loadgen.Report{
		"p99":    {TargetRate: 100, AchievedRate: 100, Total: loadgen.Stats{P99: 50}, Types: []loadgen.Stats{{Type: loadgen.Cart, P99: 50}}},
		"errors": {TargetRate: 100, AchievedRate: 100, Total: loadgen.Stats{P99: 1, ErrorRate: 0.01}},
		"behind": {TargetRate: 100, AchievedRate: 80, Behind: true, Total: loadgen.Stats{P99: 1}},
	} {
		if fm.Verdict(r) == "" {
			t.Errorf("%s: a failing step passed", name)
		}
	}
}

// TestFindMaxPerTypeRule: under the per-type rule a step fails when one type other than login
// passes the common bound, even with a total p99 well under it, and names that type; login
// slower than the others but within its own bound passes; login past its bound fails. Under
// the total rule only the total's p99 counts.
func TestFindMaxPerTypeRule(t *testing.T) {
	fm := loadgen.FindMax{Start: 10, Factor: 2, Limit: 10, MaxP99: 50 * time.Millisecond, TypeP99: map[string]time.Duration{loadgen.Login: 250 * time.Millisecond},
		MaxErrorRate: 0.01}
	step := func(total float64, p99 map[string]float64) loadgen.Report {
		r := loadgen.Report{TargetRate: 100, AchievedRate: 100, Total: loadgen.Stats{Type: "total", P99: total}}
		for _, k := range []string{loadgen.Browse, loadgen.Cart, loadgen.Checkout, loadgen.Login} {
			r.Types = append(r.Types, loadgen.Stats{Type: k, P99: p99[k]})
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		rep      loadgen.Report
		failType string // "" passes
	}{
		{"all fast", step(5, map[string]float64{loadgen.Browse: 3, loadgen.Cart: 8, loadgen.Checkout: 20, loadgen.Login: 70}), ""},
		{"only login slow, within its bound", step(80, map[string]float64{loadgen.Browse: 3, loadgen.Cart: 8, loadgen.Checkout: 20, loadgen.Login: 240}), ""},
		{"one cart type over", step(9, map[string]float64{loadgen.Browse: 3, loadgen.Cart: 51, loadgen.Checkout: 20, loadgen.Login: 70}), loadgen.Cart},
		{"cart and checkout over", step(9, map[string]float64{loadgen.Browse: 3, loadgen.Cart: 51, loadgen.Checkout: 60, loadgen.Login: 70}), loadgen.Cart},
		{"login over its own bound", step(9, map[string]float64{loadgen.Browse: 3, loadgen.Cart: 8, loadgen.Checkout: 20, loadgen.Login: 260}), loadgen.Login},
	} {
		fm := fm
		best, steps, err := fm.Run(context.Background(), func(ctx context.Context, rate float64) (loadgen.Report, error) {
			return tc.rep, nil
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		first := steps[0]
		if first.Pass != (tc.failType == "") || first.FailedType != tc.failType {
			t.Errorf("%s: pass %v, failed type %q (%s); want failed type %q", tc.name, first.Pass, first.FailedType, first.Why, tc.failType)
		}
		if tc.name == "cart and checkout over" && !strings.Contains(first.Why, loadgen.Checkout) {
			t.Errorf("%s: why %q names only the first", tc.name, first.Why)
		}
		if tc.failType != "" && (best != 0 || !strings.Contains(first.Why, tc.failType)) {
			t.Errorf("%s: best %v, why %q; want 0 and the type named", tc.name, best, first.Why)
		}
	}
	// The total rule: login alone slow within its bound fails the step by the total's p99.
	fm.Total = true
	if why := fm.Verdict(step(80, map[string]float64{loadgen.Login: 240})); !strings.Contains(why, "total") {
		t.Errorf("total rule: verdict %q, want the total's p99 to fail it", why)
	}
	if why := fm.Verdict(step(9, map[string]float64{loadgen.Cart: 51})); why != "" {
		t.Errorf("total rule: a type over the bound with the total under failed the step: %s", why)
	}
}
