package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
)

// History is the order-history read-model contract (ORD-2, HIS-1).
func History(t *testing.T, newRepo func(t *testing.T) history.Repository) {
	ctx := context.Background()
	t.Run("ORD-2 HIS-1 newest first, same instant kept, upsert idempotent, pages", func(t *testing.T) {
		t.Parallel()
		r := newRepo(t)
		user := uid("u")
		entry := func(at time.Time) history.Entry {
			return history.Entry{UserID: user, OrderID: uid("o"), PlacedAt: at, UpdatedAt: at, Status: order.Created,
				Zone: "eu", Total: money.MustParse("9.99"),
				Items: []order.Item{{ProductID: "p1", Category: "c", Name: "Widget", Quantity: 1, UnitPrice: money.MustParse("9.99")}}}
		}
		var entries []history.Entry
		for i := 0; i < 5; i++ {
			entries = append(entries, entry(base.Add(time.Duration(i)*time.Hour)))
		}
		entries = append(entries, entry(base.Add(4*time.Hour))) // same instant as entries[4]
		for _, e := range entries {
			if err := r.UpsertEntry(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		other := entry(base)
		other.UserID = uid("u")
		if err := r.UpsertEntry(ctx, other); err != nil {
			t.Fatal(err)
		}
		paid := entries[2]
		paid.Status, paid.UpdatedAt = order.Paid, base.Add(10*time.Hour)
		for i := 0; i < 2; i++ { // replayed by the projector
			if err := r.UpsertEntry(ctx, paid); err != nil {
				t.Fatal(err)
			}
		}
		// The placement's entry applied again after the status change's (a checkout's own
		// follow-ups cut short, then applied by the projector): the newer status stays.
		if err := r.UpsertEntry(ctx, entries[2]); err != nil {
			t.Fatal(err)
		}
		var got []history.Entry
		req := paging.Request{Limit: 2}
		for i := 0; ; i++ {
			page, err := r.ListHistory(ctx, user, req)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.Items...)
			if page.Next == "" {
				break
			}
			if i > 10 {
				t.Fatal("pagination does not end")
			}
			req.Cursor = page.Next
		}
		if len(got) != len(entries) {
			t.Fatalf("got %d entries, want %d (no duplicates from replays, same-instant orders both kept)", len(got), len(entries))
		}
		seen := map[string]bool{}
		for i, e := range got {
			if seen[e.OrderID] {
				t.Errorf("order %s listed twice", e.OrderID)
			}
			seen[e.OrderID] = true
			if i > 0 && e.PlacedAt.After(got[i-1].PlacedAt) {
				t.Errorf("entry %d newer than entry %d: want newest first", i, i-1)
			}
			if e.OrderID == paid.OrderID && e.Status != order.Paid {
				t.Errorf("replayed status: got %s, want paid", e.Status)
			}
			if e.UserID != user || e.Total != money.MustParse("9.99") || len(e.Items) != 1 || e.Items[0].UnitPrice != money.MustParse("9.99") {
				t.Errorf("entry %d: %+v", i, e)
			}
		}
		if page, err := r.ListHistory(ctx, other.UserID, paging.Request{Limit: 10}); err != nil || len(page.Items) != 1 || page.Items[0].OrderID != other.OrderID {
			t.Errorf("another user's history: %d entries, %v; want only their own order", len(page.Items), err)
		}
	})
}
