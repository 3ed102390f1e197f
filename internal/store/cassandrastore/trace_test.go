package cassandrastore

import (
	"context"
	"strconv"
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
	tr, st := tracedStore(t)
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
	// A cart edit (a plain write and a read) and a checkout's freeze (lightweight transactions).
	rctx, root := tr.Tracer().Start(ctx, "request")
	item.Quantity = 2
	_, err := st.Carts().PutItem(rctx, owner, item, time.Time{}, now)
	if err == nil {
		_, err = st.Carts().BeginCheckout(rctx, owner, uuid.NewString(), now.Add(time.Minute), now)
	}
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	spans := tr.Recent.Spans()
	lwt, plain := 0, 0
	// The driver may retry a statement (a timeout on a loaded node): a try starts at attempt 0
	// and each retry follows its failed previous attempt; only a try's last attempt answers.
	last := map[string]tracing.Span{} // each statement's latest attempt
	answered := func(s tracing.Span) {
		if s.Attrs[string(tracing.KeyOutcome)] != "ok" {
			t.Errorf("statement %s: its last attempt %s has outcome %q", s.Name, s.Attrs[string(tracing.KeyAttempt)], s.Attrs[string(tracing.KeyOutcome)])
		}
	}
	for _, s := range spans[:len(spans)-1] {
		if s.ParentID != root.SpanContext().SpanID().String() || s.Attrs[string(tracing.KeyKind)] != tracing.KindStatement {
			t.Errorf("span %s (parent %s, attrs %v), want a statement under the request", s.Name, s.ParentID, s.Attrs)
			continue
		}
		a := s.Attrs
		if a[string(tracing.KeyBackend)] != "cassandra" || a[string(tracing.KeyConsistency)] == "" ||
			(s.Name != "batch" && a[string(tracing.KeyRows)] == "") {
			t.Errorf("statement %s attributes %v", s.Name, a)
		}
		attempt, err := strconv.Atoi(a[string(tracing.KeyAttempt)])
		prev, seen := last[s.Name]
		switch {
		case err != nil || attempt < 0:
			t.Errorf("statement %s attempt %q", s.Name, a[string(tracing.KeyAttempt)])
		case attempt == 0 && seen:
			answered(prev) // a new try: the one before it ended
		case attempt > 0 && (!seen || prev.Attrs[string(tracing.KeyAttempt)] != strconv.Itoa(attempt-1) || prev.Attrs[string(tracing.KeyOutcome)] != "error"):
			t.Errorf("statement %s retry %d does not follow its failed attempt %d (previous %v)", s.Name, attempt, attempt-1, prev.Attrs)
		}
		last[s.Name] = s
		switch {
		case a[string(tracing.KeyLWT)] == "true":
			lwt++
		case s.Name == "update.user_carts":
			plain++
		}
	}
	for _, s := range last {
		answered(s)
	}
	if len(spans) < 4 || lwt == 0 || plain == 0 {
		t.Errorf("%d spans, %d of them LWT, %d plain cart writes; want a cart edit's plain write and read, and a freeze's LWTs", len(spans), lwt, plain)
	}
	bs := tracing.Summarize(spans, nil)
	if len(bs) != 1 || bs[0].InStatements <= 0 || bs[0].InStatements > bs[0].Mean {
		t.Errorf("breakdown %+v", bs)
	}
	for _, s := range spans {
		t.Logf("%-28s %8.3f ms %v", s.Name, float64(s.Duration())/1e6, s.Attrs)
	}
}

// tracedStore opens a store on the shared node that traces every call made under a span.
func tracedStore(t *testing.T) (*tracing.Tracing, *Store) {
	t.Helper()
	store(t)
	tr, err := tracing.Start(context.Background(), tracing.Config{SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	st, err := Open(context.Background(), Config{Hosts: testHosts, Keyspace: testKeyspace, Tracer: tr.Tracer()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return tr, st
}
