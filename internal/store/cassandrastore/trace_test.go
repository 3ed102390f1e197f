package cassandrastore

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/tracing"
)

// TestStatementSpans: through the driver's query observer, every statement a traced call
// runs on the real node is a span under the caller's, with the consistency level, the
// attempt, the rows (of a query; a batch returns none) and whether it is a lightweight transaction; an untraced call adds none.
func TestStatementSpans(t *testing.T) {
	store(t)
	tr, err := tracing.Start(context.Background(), tracing.Config{SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	st, err := Open(context.Background(), Config{Hosts: testHosts, Keyspace: testKeyspace, Tracer: tr.Tracer()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now().UTC()
	owner := cart.User(uuid.NewString())
	item := cart.Item{ProductID: "a", Category: "c", Quantity: 1}
	if _, err := st.Carts().PutItem(ctx, owner, item, time.Time{}, now); err != nil { // untraced
		t.Fatal(err)
	}
	if n := len(tr.Recent.Spans()); n != 0 {
		t.Fatalf("an untraced call left %d spans", n)
	}
	rctx, root := tr.Tracer().Start(ctx, "request")
	item.Quantity = 2
	_, err = st.Carts().PutItem(rctx, owner, item, time.Time{}, now)
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	spans := tr.Recent.Spans()
	lwt := 0
	for _, s := range spans[:len(spans)-1] {
		if s.ParentID != root.SpanContext().SpanID().String() || s.Attrs[string(tracing.KeyKind)] != tracing.KindStatement {
			t.Errorf("span %s (parent %s, attrs %v), want a statement under the request", s.Name, s.ParentID, s.Attrs)
			continue
		}
		a := s.Attrs
		if a[string(tracing.KeyBackend)] != "cassandra" || a[string(tracing.KeyConsistency)] == "" || a[string(tracing.KeyAttempt)] != "0" ||
			a[string(tracing.KeyOutcome)] != "ok" || (s.Name != "batch" && a[string(tracing.KeyRows)] == "") {
			t.Errorf("statement %s attributes %v", s.Name, a)
		}
		if a[string(tracing.KeyLWT)] == "true" {
			lwt++
		}
	}
	if len(spans) < 2 || lwt == 0 {
		t.Errorf("%d spans, %d of them LWT; a cart edit is at least a read and a conditional write", len(spans), lwt)
	}
	bs := tracing.Summarize(spans, nil)
	if len(bs) != 1 || bs[0].InStatements <= 0 || bs[0].InStatements > bs[0].Mean {
		t.Errorf("breakdown %+v", bs)
	}
	for _, s := range spans {
		t.Logf("%-28s %8.3f ms %v", s.Name, float64(s.Duration())/1e6, s.Attrs)
	}
}
