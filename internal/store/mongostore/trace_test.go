package mongostore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/tracing"
)

// TestCommandSpans: through the driver's command monitor, each wire command a traced call
// sends the real server is a span under the caller's, and the command metric still sees every
// command (the monitor feeds both); an untraced call adds no span.
func TestCommandSpans(t *testing.T) {
	tr, err := tracing.Start(context.Background(), tracing.Config{SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	var mu sync.Mutex
	metric := map[string]int{}
	s, _ := liveStoreWith(t, Options{Tracer: tr.Tracer(), ObserveCommand: func(command string, _ time.Duration, _ error) {
		mu.Lock()
		metric[command]++
		mu.Unlock()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now().UTC()
	owner := cart.Guest("s1")
	item := cart.Item{ProductID: "a", Category: "c", Quantity: 1}
	if _, err := s.Carts().PutItem(ctx, owner, item, now.Add(time.Hour), now); err != nil { // untraced
		t.Fatal(err)
	}
	if n := len(tr.Recent.Spans()); n != 0 {
		t.Fatalf("an untraced call left %d spans", n)
	}
	mu.Lock()
	clear(metric)
	mu.Unlock()
	rctx, root := tr.Tracer().Start(ctx, "request")
	_, err = s.Carts().ActiveCart(rctx, owner, now)
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	spans := tr.Recent.Spans()
	mu.Lock()
	defer mu.Unlock()
	traced := map[string]int{} // command spans by name
	for _, sp := range spans {
		if sp.ParentID == "" {
			continue
		}
		traced[sp.Name]++
		a := sp.Attrs
		if sp.ParentID != root.SpanContext().SpanID().String() || a[string(tracing.KeyKind)] != tracing.KindStatement ||
			a[string(tracing.KeyBackend)] != "mongodb" || a[string(tracing.KeyOutcome)] != "ok" {
			t.Errorf("span %s (parent %s) attributes %v, want an ok mongodb command under the request", sp.Name, sp.ParentID, a)
		}
		if sp.Start.Before(spans[len(spans)-1].Start) || sp.End.After(spans[len(spans)-1].End) {
			t.Errorf("command %s [%v, %v] outside the request", sp.Name, sp.Start, sp.End)
		}
	}
	if len(traced) == 0 {
		t.Fatal("no command span under the traced read")
	}
	// By name, and at least: the client's other commands meanwhile (its own background work)
	// reach the metric too, but never a span of this request.
	for name, n := range traced {
		if metric[name] < n {
			t.Errorf("%d %s command spans, the metric saw %d: every traced command must reach it (metric %v)", n, name, metric[name], metric)
		}
	}
}
