package cassandrastore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/tracing"
)

// TestEditsOfALiveCartAreNoPaxosRound: once a cart exists, putting and removing its lines runs
// no lightweight transaction and no SERIAL read, for a user's cart and a guest's: each edit is
// a plain write and the fence read that answers it.
func TestEditsOfALiveCartAreNoPaxosRound(t *testing.T) {
	tr, st := tracedStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now().UTC()
	for _, c := range []struct {
		owner   cart.Owner
		expires time.Time
	}{
		{cart.User(uuid.NewString()), time.Time{}},
		{cart.Guest(uuid.NewString()), now.Add(time.Hour)},
	} {
		item := cart.Item{ProductID: "a", Category: "c", Quantity: 1}
		if _, err := st.Carts().PutItem(ctx, c.owner, item, c.expires, now); err != nil { // creates the cart
			t.Fatal(err)
		}
		rctx, root := tr.Tracer().Start(ctx, "edits")
		item.ProductID = "b"
		_, err := st.Carts().PutItem(rctx, c.owner, item, c.expires, now)
		if err == nil {
			_, err = st.Carts().RemoveItem(rctx, c.owner, "a", now)
		}
		if err == nil {
			item.Quantity = 3
			_, err = st.Carts().PutItem(rctx, c.owner, item, c.expires, now)
		}
		root.End()
		if err != nil {
			t.Fatal(err)
		}
		var stmts []string
		for _, s := range tr.Recent.Spans() {
			if s.ParentID != root.SpanContext().SpanID().String() || s.Attrs[string(tracing.KeyKind)] != tracing.KindStatement {
				continue
			}
			stmts = append(stmts, s.Name)
			if s.Attrs[string(tracing.KeyLWT)] == "true" || strings.Contains(s.Attrs[string(tracing.KeyConsistency)], "SERIAL") {
				t.Errorf("%v: statement %s is a Paxos round (attributes %v)", c.owner, s.Name, s.Attrs)
			}
		}
		if len(stmts) < 3 || len(stmts) > 6 {
			t.Errorf("%v: three edits ran %d statements %v, want a write and a read each", c.owner, len(stmts), stmts)
		}
	}
}
