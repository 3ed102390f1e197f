package cli

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// benchServer starts bench's in-process server with bench's flags args.
func benchServer(t *testing.T, args ...string) string {
	t.Helper()
	var o benchOptions
	cmd := newCmdBench(IO{}, func(_ context.Context, bo benchOptions) error { o = bo; return nil })
	if err := execUnderRoot(t, cmd, append([]string{"bench"}, args...)...); err != nil {
		t.Fatal(err)
	}
	addr, stop, err := startBenchServer(context.Background(), o)
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
	bs := tracedBreakdown(context.Background(), &log, http.DefaultClient, []string{base}, benchAdminToken, time.Time{})
	if bs != nil || !strings.Contains(log.String(), "--trace-sample-ratio") {
		t.Errorf("breakdown %v, log %q: want none, and the flag named", bs, log.String())
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
