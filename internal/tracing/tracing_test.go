package tracing

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"
	"time"
)

func start(t *testing.T, c Config) *Tracing {
	t.Helper()
	tr, err := Start(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if tr == nil {
		t.Fatalf("Start(%+v) = nil, want tracing on", c)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr
}

// unsetenv unsets k for the test, restoring it after.
func unsetenv(t *testing.T, k string) {
	t.Setenv(k, "")
	os.Unsetenv(k)
}

func TestOffUnlessRatioOrEndpoint(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
		unsetenv(t, k)
	}
	tr, err := Start(context.Background(), Config{})
	if err != nil || tr != nil {
		t.Fatalf("Start(zero config) = %v, %v; want nil, nil (off)", tr, err)
	}
	if tr.Tracer() != nil {
		t.Error("a nil Tracing has a tracer")
	}
	for _, r := range []float64{1.5, -1, math.NaN()} {
		for _, given := range []bool{true, false} {
			if _, err := Start(context.Background(), Config{SampleRatio: r, RatioGiven: given}); err == nil {
				t.Errorf("ratio %v (given %t) accepted", r, given)
			}
		}
	}
	if on := start(t, Config{SampleRatio: 0.5}); on.Exporting || on.Ratio != 0.5 {
		t.Errorf("ratio 0.5 alone: exporting %t, ratio %v; want the ring only, at 0.5", on.Exporting, on.Ratio)
	}
}

// TestRatioFromTheEnvironment: a collector named by the environment traces the ratio
// OTEL_TRACES_SAMPLER/_ARG ask for, never all requests by default; a given ratio wins.
func TestRatioFromTheEnvironment(t *testing.T) {
	unsetenv(t, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	unsetenv(t, "OTEL_TRACES_SAMPLER")
	unsetenv(t, "OTEL_TRACES_SAMPLER_ARG")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	if tr, err := Start(context.Background(), Config{}); err == nil || tr != nil {
		t.Errorf("an environment's endpoint without a sampler: %v, %v; want an error naming the ratio", tr, err)
	}
	if tr, err := Start(context.Background(), Config{Endpoint: "http://127.0.0.1:1"}); err == nil || tr != nil {
		t.Errorf("--otlp-endpoint without a ratio: %v, %v; want an error", tr, err)
	}
	if tr, err := Start(context.Background(), Config{RatioGiven: true}); err != nil || tr != nil {
		t.Errorf("ratio 0 given: %v, %v; want off", tr, err)
	}
	if on := start(t, Config{SampleRatio: 0.1}); !on.Exporting || on.Ratio != 0.1 {
		t.Errorf("ratio 0.1 with the environment's endpoint: exporting %t, ratio %v", on.Exporting, on.Ratio)
	}
	for sampler, want := range map[string]float64{"always_on": 1, "parentbased_always_on": 1, "traceidratio": 1} {
		t.Setenv("OTEL_TRACES_SAMPLER", sampler)
		if on := start(t, Config{}); !on.Exporting || on.Ratio != want {
			t.Errorf("OTEL_TRACES_SAMPLER=%s: exporting %t, ratio %v; want %v", sampler, on.Exporting, on.Ratio, want)
		}
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
	t.Setenv("OTEL_TRACES_SAMPLER_ARG", "0.25")
	if on := start(t, Config{}); on.Ratio != 0.25 {
		t.Errorf("OTEL_TRACES_SAMPLER_ARG=0.25: ratio %v", on.Ratio)
	}
	if on := start(t, Config{SampleRatio: 0.5, RatioGiven: true}); on.Ratio != 0.5 {
		t.Errorf("the given ratio 0.5 against the environment's 0.25: %v", on.Ratio)
	}
	for _, arg := range []string{"-1", "2", "x"} {
		t.Setenv("OTEL_TRACES_SAMPLER_ARG", arg)
		if _, err := Start(context.Background(), Config{}); err == nil {
			t.Errorf("OTEL_TRACES_SAMPLER_ARG=%s accepted", arg)
		}
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	if tr, err := Start(context.Background(), Config{}); err != nil || tr != nil {
		t.Errorf("always_off: %v, %v; want off", tr, err)
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "jaeger_remote")
	if _, err := Start(context.Background(), Config{}); err == nil {
		t.Error("an unsupported sampler accepted")
	}
}

// TestSampleRatio: about the ratio of requests is kept, each one whole.
func TestSampleRatio(t *testing.T) {
	const n, ratio = 4000, 0.25
	tr := start(t, Config{SampleRatio: ratio, Keep: 3 * n})
	ctx := context.Background()
	for range n {
		rctx, root := tr.Tracer().Start(ctx, "request")
		_, child := tr.Tracer().Start(rctx, "child")
		child.End()
		Statement(rctx, tr.Tracer(), "sqlite", "select.t", time.Now(), time.Now(), nil)
		root.End()
	}
	spans := tr.Recent.Spans()
	roots := 0
	perTrace := map[string]int{}
	for _, s := range spans {
		perTrace[s.TraceID]++
		if s.ParentID == "" {
			roots++
		}
	}
	// Binomial(4000, 0.25): sd 27; 0.04*4000 = 160 is six sd.
	if got := float64(roots) / n; got < ratio-0.04 || got > ratio+0.04 {
		t.Errorf("sampled %d of %d requests (%.3f), want about %.2f", roots, n, got, ratio)
	}
	for id, k := range perTrace {
		if k != 3 {
			t.Fatalf("trace %s kept %d spans, want 3 (root, child, statement)", id, k)
		}
	}
}

// TestRecorderBounded: the ring never holds more than Keep spans and keeps the newest traces
// whole.
func TestRecorderBounded(t *testing.T) {
	const keep = 100
	tr := start(t, Config{SampleRatio: 1, Keep: keep})
	for i := range 1000 {
		ctx, root := tr.Tracer().Start(context.Background(), fmt.Sprintf("r%d", i))
		for range 2 {
			_, c := tr.Tracer().Start(ctx, "c")
			c.End()
		}
		root.End()
		if n := len(tr.Recent.Spans()); n > keep {
			t.Fatalf("after %d traces the recorder holds %d spans, keep is %d", i+1, n, keep)
		}
	}
	spans := tr.Recent.Spans()
	if len(spans) != 99 { // 33 whole traces of 3
		t.Fatalf("holds %d spans, want 99 (33 traces of 3)", len(spans))
	}
	if last := spans[len(spans)-1]; last.Name != "r999" {
		t.Errorf("newest span %q, want the last root r999", last.Name)
	}
	if first := spans[0]; first.ParentID == "" || spans[2].Name != "r967" {
		t.Errorf("oldest trace kept starts %+v ... %q, want r967's children then r967", first, spans[2].Name)
	}
}

// TestUnsampledCostsNothing: below an unsampled request no span is opened and Child/Wait
// return the context as it is.
func TestUnsampledCostsNothing(t *testing.T) {
	tr := start(t, Config{SampleRatio: 1e-9})
	ctx, root := tr.Tracer().Start(context.Background(), "request")
	if root.SpanContext().IsSampled() {
		t.Fatal("the 1e-9 sampler sampled this trace id (one chance in a billion)")
	}
	if c, sp := Child(ctx, "x", KindService); sp != nil || c != ctx {
		t.Error("Child opened a span under an unsampled request")
	}
	Wait(ctx, "w")()
	root.End()
	if n := len(tr.Recent.Spans()); n != 0 {
		t.Errorf("recorded %d spans of an unsampled request", n)
	}
	if a := testing.AllocsPerRun(100, func() {
		_, _ = Child(ctx, "x", KindService)
		Wait(ctx, "w")()
	}); a != 0 {
		t.Errorf("Child and Wait under an unsampled request allocate %.0f times, want 0", a)
	}
}

func TestChildAndWaitUseTheRequestsProvider(t *testing.T) {
	tr := start(t, Config{SampleRatio: 1})
	ctx, root := tr.Tracer().Start(context.Background(), "request")
	sctx, sync := Child(ctx, "projector.sync", KindSync)
	Wait(sctx, "projector.wait_drain")()
	End(sync, nil)
	root.End()
	spans := tr.Recent.Spans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want 3", len(spans))
	}
	byName := map[string]Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	if w, s := byName["projector.wait_drain"], byName["projector.sync"]; w.ParentID != s.SpanID || s.ParentID != byName["request"].SpanID {
		t.Errorf("wait's parent %s, sync %s (its parent %s), request %s", w.ParentID, s.SpanID, s.ParentID, byName["request"].SpanID)
	}
	if k := byName["projector.wait_drain"].Attrs[string(KeyKind)]; k != KindWait {
		t.Errorf("wait span kind %q", k)
	}
	if o := byName["projector.sync"].Attrs[string(KeyOutcome)]; o != "ok" {
		t.Errorf("sync outcome %q, want ok", o)
	}
}

func TestStatementName(t *testing.T) {
	for stmt, want := range map[string]string{
		"SELECT id FROM carts WHERE x = ?":                                "select.carts",
		"INSERT INTO cart_items (a) VALUES (?) ON CONFLICT DO UPDATE SET": "insert.cart_items",
		"UPDATE stock SET n = n - 1":                                      "update.stock",
		"DELETE FROM sessions WHERE id = ?":                               "delete.sessions",
		"  ":                                                              "unknown",
		"BEGIN":                                                           "begin",
		"SELECT product_id, qty FROM user_carts WHERE user_id = ?":  "select.user_carts",
		"INSERT INTO shardmart.sessions (id, data) VALUES (?, ?)":   "insert.sessions",
		"UPDATE guest_carts USING TTL ? SET qty = ? WHERE id = ?":   "update.guest_carts",
		"DELETE FROM \"user_carts\" WHERE user_id = ? AND item = ?": "delete.user_carts",
		"BEGIN BATCH": "begin",
	} {
		if got := StatementName(stmt); got != want {
			t.Errorf("StatementName(%q) = %q, want %q", stmt, got, want)
		}
	}
}

// TestRecorderPendingBounded: spans under a root that never ends cannot grow memory past the
// bound, requests in flight meanwhile survive the overflow whole, and a child ending after its
// root finished is dropped, not left waiting.
func TestRecorderPendingBounded(t *testing.T) {
	const keep = 100
	tr := start(t, Config{SampleRatio: 1, Keep: keep})
	bg := context.Background()
	leakCtx, _ := tr.Tracer().Start(bg, "leaked") // never ends
	child := func(ctx context.Context) {
		_, c := tr.Tracer().Start(ctx, "c")
		c.End()
	}
	child(leakCtx)
	flightCtx, flight := tr.Tracer().Start(bg, "in-flight")
	child(flightCtx)
	for range 10 * keep {
		child(leakCtx)
		if n := tr.Recent.npending; n > keep {
			t.Fatalf("%d spans pending, bound %d", n, keep)
		}
	}
	flight.End()
	spans := tr.Recent.Spans()
	if len(spans) != 2 || spans[1].Name != "in-flight" || spans[0].ParentID != spans[1].SpanID {
		t.Fatalf("kept %+v, want the in-flight request whole (its child, then it)", spans)
	}

	doneCtx, done := tr.Tracer().Start(bg, "done")
	done.End()
	child(doneCtx) // late: its root has ended
	if _, ok := tr.Recent.pending[done.SpanContext().TraceID().String()]; ok {
		t.Error("a child of a finished trace waits in pending")
	}
	for _, s := range tr.Recent.Spans() {
		if s.TraceID == done.SpanContext().TraceID().String() && s.ParentID != "" {
			t.Errorf("the late child joined the finished trace: %+v", s)
		}
	}
	for range 10 * keep { // more leaked roots, one child each
		ctx, _ := tr.Tracer().Start(bg, "leaked")
		child(ctx)
	}
	if n, m := tr.Recent.npending, len(tr.Recent.pending); n > keep || m > keep {
		t.Errorf("%d spans of %d traces pending, bound %d", n, m, keep)
	}
}

func TestIsConditional(t *testing.T) {
	for stmt, want := range map[string]bool{
		"INSERT INTO sessions (id) VALUES (?) IF NOT EXISTS":               true,
		"insert into sessions (id) values (?) if not exists":               true,
		"UPDATE user_carts SET v = ? WHERE id = ? IF v = ?":                true,
		"UPDATE user_carts SET v = ? WHERE id = ?\nIF\tversion = ?":        true,
		"DELETE FROM carts WHERE id = ? IF EXISTS":                         true,
		"UPDATE t SET a = ? WHERE k = ? If a = ?":                          true,
		"UPDATE t SET a = 'x IF y' WHERE k = ?":                            false,
		`UPDATE t SET "IF" = ? WHERE k = ?`:                                false,
		"UPDATE t SET a = 'it''s IF' WHERE k = ?":                          false,
		"UPDATE t SET if_set = ? WHERE k = ?":                              false,
		"SELECT * FROM t WHERE k = ?":                                      false,
		"CREATE TABLE IF NOT EXISTS t (k int PRIMARY KEY)":                 false,
		"UPDATE t SET a = ? WHERE k = ?":                                   false,
		"INSERT INTO t (k) VALUES (?)":                                     false,
		"":                                                                 false,
		"UPDATE t SET a = 'unterminated IF":                                false,
		"DELETE FROM t WHERE k = ? IF a = 'IF' AND b = ?":                  true,
		"UPDATE t USING TTL 5 SET a = ? WHERE k = ? IF EXISTS":             true,
		"UPDATE t SET m['if'] = ? WHERE k = ?":                             false,
		"BEGIN BATCH UPDATE t SET a = ? WHERE k = ? IF EXISTS APPLY BATCH": false, // the driver reports a batch's statements one by one
	} {
		if got := IsConditional(stmt); got != want {
			t.Errorf("IsConditional(%q) = %t, want %t", stmt, got, want)
		}
	}
}
