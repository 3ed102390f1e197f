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
	commands := 0
	for _, sp := range spans {
		if sp.ParentID == "" {
			continue
		}
		commands++
		a := sp.Attrs
		if sp.ParentID != root.SpanContext().SpanID().String() || a[string(tracing.KeyKind)] != tracing.KindStatement ||
			a[string(tracing.KeyBackend)] != "mongodb" || a[string(tracing.KeyOutcome)] != "ok" {
			t.Errorf("span %s (parent %s) attributes %v, want an ok mongodb command under the request", sp.Name, sp.ParentID, a)
		}
		if metric[sp.Name] == 0 {
			t.Errorf("command %s traced but not in the metric %v", sp.Name, metric)
		}
		if sp.Start.Before(spans[len(spans)-1].Start) || sp.End.After(spans[len(spans)-1].End) {
			t.Errorf("command %s [%v, %v] outside the request", sp.Name, sp.Start, sp.End)
		}
	}
	if commands == 0 || commands != sumValues(metric) {
		t.Errorf("%d command spans, the metric saw %v: want every command of the read, once in each", commands, metric)
	}
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
