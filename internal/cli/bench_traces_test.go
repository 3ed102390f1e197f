package cli

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/loadgen"
)

// benchServer starts bench's in-process server with bench's flags args.
func benchServer(t *testing.T, args ...string) string {
	t.Helper()
	var o benchOptions
	cmd := newCmdBench(IO{}, func(_ context.Context, bo benchOptions) error { o = bo; return nil })
	if err := execUnderRoot(t, cmd, append([]string{"bench"}, args...)...); err != nil {
		t.Fatal(err)
	}
	addr, _, stop, err := startBenchServer(context.Background(), o, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return "http://" + addr
}

// TestBenchBreakdownFromServerTraces: bench's --trace-sample-ratio reaches its server, and the
// breakdown it reads back over the admin route covers the requests sent after `since`, with
// their statements, and nothing before.
func TestBenchBreakdownFromServerTraces(t *testing.T) {
	base := benchServer(t, "--trace-sample-ratio", "1")
	ctx := context.Background()
	since := time.Now()
	for range 3 {
		resp, err := http.Post(base+"/v1/sessions", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /v1/sessions: %d", resp.StatusCode)
		}
	}
	bs, err := breakdown(ctx, http.DefaultClient, []string{base}, benchAdminToken, since)
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 1 || bs[0].Request != "POST /v1/sessions" || bs[0].Requests != 3 {
		t.Fatalf("breakdown %+v, want the 3 session starts alone (the seeding and /readyz came before)", bs)
	}
	found := false
	for _, st := range bs[0].Statements {
		found = found || (st.Statement == "insert.sessions" && st.Backend == "sqlite" && st.PerReq == 1)
	}
	if !found {
		t.Errorf("statements %+v, want one insert.sessions per request", bs[0].Statements)
	}
	var out strings.Builder
	if err := writeBreakdown(&out, bs, "test"); err != nil || !strings.Contains(out.String(), "POST /v1/sessions: 3 sampled") {
		t.Errorf("printed %q (%v)", out.String(), err)
	}
	if _, err := breakdown(ctx, http.DefaultClient, []string{base}, "wrong-token", since); err == nil || errors.Is(err, errTracingOff) {
		t.Errorf("a wrong admin token: %v, want the server's refusal", err)
	}
}

// TestBenchBreakdownTracingOff: a server without tracing says so, and bench goes on without a
// breakdown, telling why.
func TestBenchBreakdownTracingOff(t *testing.T) {
	base := benchServer(t)
	if _, err := breakdown(context.Background(), http.DefaultClient, []string{base}, benchAdminToken, time.Time{}); !errors.Is(err, errTracingOff) {
		t.Fatalf("tracing off: %v, want errTracingOff", err)
	}
	var log strings.Builder
	st := stepTraces{log: &log, client: http.DefaultClient, bases: []string{base}, admin: benchAdminToken}
	st.read(context.Background(), 10, time.Time{})
	st.read(context.Background(), 20, time.Time{})
	if st.byRate != nil || strings.Count(log.String(), "no breakdown") != 1 || !strings.Contains(log.String(), "--trace-sample-ratio") {
		t.Errorf("breakdowns %v, log %q: want none, and the flag named once", st.byRate, log.String())
	}
}

// TestFindMaxBreakdownIsTheShownStep: each step's breakdown is read after it, and find-max's
// report takes the one of the step whose table it prints (the best), not the last step's.
func TestFindMaxBreakdownIsTheShownStep(t *testing.T) {
	base := benchServer(t, "--trace-sample-ratio", "1")
	ctx := context.Background()
	var log strings.Builder
	st := stepTraces{log: &log, client: http.DefaultClient, bases: []string{base}, admin: benchAdminToken}
	step := func(rate float64, sessions int) {
		since := time.Now()
		for range sessions {
			resp, err := http.Post(base+"/v1/sessions", "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		st.read(ctx, rate, since)
	}
	step(10, 3) // passes
	step(20, 2) // fails: the last step
	steps := []loadgen.Step{{Rate: 10, Pass: true}, {Rate: 20, Why: "p99"}}
	shown, ok := shownStep(steps, 10)
	if !ok || shown.Rate != 10 {
		t.Fatalf("shown step %+v (%t), want the best, 10/s", shown, ok)
	}
	if bs := st.byRate[shown.Rate]; len(bs) != 1 || bs[0].Requests != 3 {
		t.Errorf("the shown step's breakdown %+v, want its 3 session starts (log %q)", bs, log.String())
	}
	if bs := st.byRate[20]; len(bs) != 1 || bs[0].Requests != 2 {
		t.Errorf("the last step's breakdown %+v, want its own 2 requests", bs)
	}
	if shown, ok := shownStep(steps[1:], 0); !ok || shown.Rate != 20 {
		t.Errorf("no step passed: shown %+v, want the first", shown)
	}
	if _, ok := shownStep(nil, 0); ok {
		t.Error("a step shown when none ran")
	}
}

// TestServeTraceRatioGiven: serve tells tracing whether --trace-sample-ratio was passed, so
// "0" keeps tracing off while its absence lets OTEL_TRACES_SAMPLER choose.
func TestServeTraceRatioGiven(t *testing.T) {
	if o := serveOptionsFor(t); o.trace.RatioGiven {
		t.Error("no --trace-sample-ratio, but the ratio reads as given")
	}
	if o := serveOptionsFor(t, "--trace-sample-ratio", "0"); !o.trace.RatioGiven || o.trace.SampleRatio != 0 {
		t.Errorf("--trace-sample-ratio 0: given %t, ratio %v", o.trace.RatioGiven, o.trace.SampleRatio)
	}
}
