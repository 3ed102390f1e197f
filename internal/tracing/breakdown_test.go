package tracing

import (
	"strings"
	"testing"
	"time"
)

// at is a span from a to b milliseconds after t0.
func at(trace, id, parent, name, kind string, a, b float64, attrs ...string) Span {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(x float64) time.Time { return t0.Add(time.Duration(x * float64(time.Millisecond))) }
	s := Span{TraceID: trace, SpanID: id, ParentID: parent, Name: name, Start: ms(a), End: ms(b),
		Attrs: map[string]string{string(KeyKind): kind}}
	for i := 0; i+1 < len(attrs); i += 2 {
		s.Attrs[attrs[i]] = attrs[i+1]
	}
	return s
}

func TestSummarize(t *testing.T) {
	be := string(KeyBackend)
	spans := []Span{
		// Request 1: 10 ms; statements 1-3 and 2-4 overlap (a fan-out: 3 ms busy), 6-7; an LWT
		// retry on the store span, a driver retry, a 1 ms wait inside a 2 ms sync.
		at("a", "r", "", "PUT /cart", KindHTTP, 0, 10),
		withEvents(at("a", "s", "r", "carts.put_item", KindStore, 0.5, 8), EventLWTRetry, EventLWTRetry),
		at("a", "q1", "s", "select.carts", KindStatement, 1, 3, be, "cassandra"),
		at("a", "q2", "s", "select.carts", KindStatement, 2, 4, be, "cassandra", string(KeyAttempt), "1"),
		at("a", "q3", "s", "update.carts", KindStatement, 6, 7, be, "cassandra", string(KeyAttempt), "0"),
		at("a", "y", "r", "projector.sync", KindSync, 8, 10),
		at("a", "w", "y", "projector.wait_drain", KindWait, 8, 9),
		// Request 2 of the same type: 20 ms, one 2 ms statement.
		at("b", "r", "", "PUT /cart", KindHTTP, 100, 120),
		at("b", "q", "r", "update.carts", KindStatement, 101, 103, be, "cassandra"),
		// Another type, and a trace without its root (not a request).
		at("c", "r", "", "GET /cart", KindHTTP, 0, 1),
		at("d", "x", "gone", "select.carts", KindStatement, 0, 1, be, "cassandra"),
	}
	bs := Summarize(spans, nil)
	if len(bs) != 2 || bs[0].Request != "PUT /cart" || bs[1].Request != "GET /cart" {
		t.Fatalf("request types %+v, want PUT /cart then GET /cart", bs)
	}
	b := bs[0]
	ms := func(x float64) time.Duration { return time.Duration(x * float64(time.Millisecond)) }
	if b.Requests != 2 || b.Mean != ms(15) || b.P50 != ms(10) {
		t.Errorf("requests %d mean %v p50 %v, want 2, 15ms, 10ms", b.Requests, b.Mean, b.P50)
	}
	// Busy: request 1 has 3 + 1 ms, request 2 has 2 ms: mean 3 ms.
	if b.InStatements != ms(3) || b.Between != ms(12) || b.InStatements+b.Between != b.Mean {
		t.Errorf("in statements %v, between %v, want 3ms + 12ms = the mean", b.InStatements, b.Between)
	}
	if b.Sync != ms(1) || b.Waits != ms(0.5) || b.StatementRetries != 0.5 || b.LWTRetries != 1 {
		t.Errorf("sync %v waits %v retries %v lwt %v, want 1ms, 0.5ms, 0.5, 1", b.Sync, b.Waits, b.StatementRetries, b.LWTRetries)
	}
	want := []StatementTime{{"select.carts", "cassandra", 1, ms(2)}, {"update.carts", "cassandra", 1, ms(1.5)}}
	if len(b.Statements) != 2 || b.Statements[0] != want[0] || b.Statements[1] != want[1] {
		t.Errorf("statements %+v, want %+v", b.Statements, want)
	}
	only := Summarize(spans, func(root Span) bool { return root.Start.Sub(spans[0].Start) >= 50*time.Millisecond })
	if len(only) != 1 || only[0].Requests != 1 || only[0].Mean != ms(20) {
		t.Errorf("filtered to roots from 50 ms: %+v, want request 2 alone", only)
	}
	var out strings.Builder
	if err := Write(&out, bs); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"PUT /cart: 2 sampled, mean 15.00 ms", "in statements", "select.carts", "between statements 12.00 ms", "1.00 LWT"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("text lacks %q:\n%s", line, out.String())
		}
	}
}

func withEvents(s Span, names ...string) Span {
	s.Events = map[string]int{}
	for _, n := range names {
		s.Events[n]++
	}
	return s
}
