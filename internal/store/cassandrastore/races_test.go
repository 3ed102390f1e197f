package cassandrastore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/validation"
)

// Cases beyond the contract suite: the races the lightweight transactions are there for,
// the TTLs as Cassandra stores them, and pagination across history months.

func TestConcurrentLoginsMergeOnce(t *testing.T) {
	r := store(t).Carts()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	sid, uid := rid("s"), rid("u")
	for _, it := range []cart.Item{{ProductID: "a", Category: "c", Quantity: 2}, {ProductID: "b", Category: "c", Quantity: 1}} {
		if _, err := r.PutItem(ctx, cart.Guest(sid), it, now.Add(time.Hour), now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.PutItem(ctx, cart.User(uid), cart.Item{ProductID: "a", Category: "c", Quantity: 3}, time.Time{}, now); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Merge(ctx, sid, uid, now); err != nil {
				t.Errorf("merge: %v", err)
			}
		}()
	}
	wg.Wait()
	got, err := r.ActiveCart(ctx, cart.User(uid), now)
	if err != nil || !sameQty(got, map[string]int64{"a": 5, "b": 1}) {
		t.Errorf("after 6 racing logins: %+v, %v; want a=5 b=1 (merged exactly once)", got.Items, err)
	}
	if _, err := r.ActiveCart(ctx, cart.Guest(sid), now); !errors.Is(err, cart.ErrNotFound) {
		t.Errorf("guest cart still active: %v", err)
	}
}

func sameQty(c cart.Cart, want map[string]int64) bool {
	if len(c.Items) != len(want) {
		return false
	}
	for _, it := range c.Items {
		if want[it.ProductID] != it.Quantity {
			return false
		}
	}
	return true
}

func TestOrderedCartRacesWithNewCart(t *testing.T) {
	r := store(t).Carts()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	u := cart.User(rid("u"))
	c, err := r.PutItem(ctx, u, cart.Item{ProductID: "a", Category: "c", Quantity: 1}, time.Time{}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.MarkOrdered(ctx, u, c.ID, "o1", now); err != nil {
		t.Fatal(err)
	}
	// Concurrent first puts after the order create exactly one fresh cart.
	var wg sync.WaitGroup
	ids := make([]string, 10)
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := r.PutItem(ctx, u, cart.Item{ProductID: string(rune('k' + i)), Category: "c", Quantity: 1}, time.Time{}, now)
			if err != nil {
				t.Errorf("put: %v", err)
			}
			ids[i] = c.ID
		}(i)
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || id == c.ID {
			t.Fatalf("puts after the order landed in carts %v (ordered cart %s): want one fresh cart", ids, c.ID)
		}
	}
	// A replayed MarkOrdered of the old cart must not end the fresh one.
	if err := r.MarkOrdered(ctx, u, c.ID, "o1", now); err != nil {
		t.Fatal(err)
	}
	got, err := r.ActiveCart(ctx, u, now)
	if err != nil || got.ID != ids[0] || len(got.Items) != 10 {
		t.Errorf("fresh cart after a replayed MarkOrdered: %s with %d items, %v; want %s with 10", got.ID, len(got.Items), err, ids[0])
	}
}

func TestConcurrentBindOneWinner(t *testing.T) {
	r := store(t).Sessions()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	s := session.Session{ID: rid("sess"), CreatedAt: now, LastActive: now, ExpiresAt: now.Add(time.Hour), Status: session.StatusActive}
	if err := r.CreateSession(ctx, s); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	won, lost := 0, 0
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := r.BindUser(ctx, s.ID, rid("u"), now)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, session.ErrBoundToOtherUser):
				lost++
			default:
				t.Errorf("bind: %v", err)
			}
		}()
	}
	wg.Wait()
	if won != 1 || lost != 7 {
		t.Errorf("8 users racing to bind one session: %d won, %d refused; want 1 and 7", won, lost)
	}
}

// TestTTLsAsStored reads the TTL Cassandra holds for a guest cart line and a session: the
// remaining session lifetime, not a fixed table default.
func TestTTLsAsStored(t *testing.T) {
	st := store(t)
	ctx := context.Background()
	now := time.Now().UTC()
	sid := rid("s")
	exp := now.Add(90 * time.Minute)
	if _, err := st.Carts().PutItem(ctx, cart.Guest(sid), cart.Item{ProductID: "a", Category: "c", Quantity: 1}, exp, now); err != nil {
		t.Fatal(err)
	}
	if err := st.Sessions().CreateSession(ctx, session.Session{ID: sid, CreatedAt: now, LastActive: now, ExpiresAt: exp, Status: session.StatusActive}); err != nil {
		t.Fatal(err)
	}
	var lineTTL, activeTTL, sessTTL int
	if err := st.Session().Query(`SELECT TTL(quantity), TTL(active_cart) FROM guest_carts WHERE session_id = ? AND product_id = 'a' ALLOW FILTERING`, sid).Scan(&lineTTL, &activeTTL); err != nil {
		t.Fatal(err)
	}
	if err := st.Session().Query(`SELECT TTL(expires_at) FROM sessions WHERE session_id = ?`, sid).Scan(&sessTTL); err != nil {
		t.Fatal(err)
	}
	for name, ttl := range map[string]int{"cart line": lineTTL, "active cart": activeTTL, "session": sessTTL} {
		if ttl < 90*60-30 || ttl > 90*60 {
			t.Errorf("%s TTL %d s, want the remaining 5400 s", name, ttl)
		}
	}
	var userTTL *int
	u := cart.User(rid("u"))
	if _, err := st.Carts().PutItem(ctx, u, cart.Item{ProductID: "a", Category: "c", Quantity: 1}, time.Time{}, now); err != nil {
		t.Fatal(err)
	}
	if err := st.Session().Query(`SELECT TTL(quantity) FROM user_carts WHERE user_id = ? AND product_id = 'a' ALLOW FILTERING`, u.UserID).Scan(&userTTL); err != nil || userTTL != nil {
		t.Errorf("user cart line TTL %v, %v; want none", userTTL, err)
	}
}

// EVT-1: an event row lives for the configured retention counted from the event's time, not
// the table's 90-day default counted from the write; one already past it is not written.
func TestEventTTLFollowsTheConfiguredRetention(t *testing.T) {
	st := store(t)
	ctx := context.Background()
	r := (*events)(&Store{s: st.Session(), eventRetention: 2 * time.Hour})
	now := time.Now().UTC()
	actor := "u:" + rid("u")
	recent := event.Event{ID: rid("e"), Actor: actor, Type: event.View, At: now.Add(-30 * time.Minute)}
	stale := event.Event{ID: rid("e"), Actor: actor, Type: event.View, At: now.Add(-3 * time.Hour)}
	for _, e := range []event.Event{recent, stale} {
		if err := r.AppendEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	var ttl int
	err := st.Session().Query(`SELECT TTL(type) FROM user_events WHERE actor = ? AND event_date = ? AND at = ? AND event_id = ?`,
		actor, event.Day(recent.At), recent.At.Truncate(time.Millisecond), recent.ID).Scan(&ttl)
	if err != nil {
		t.Fatal(err)
	}
	if want := int((90 * time.Minute).Seconds()); ttl < want-30 || ttl > want+1 {
		t.Errorf("recent event TTL %d s, want the remaining %d s of a 2h retention", ttl, want)
	}
	var n int
	if err := st.Session().Query(`SELECT count(*) FROM user_events WHERE actor = ? AND event_date = ?`, actor, event.Day(stale.At)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if stale.At.YearDay() == recent.At.YearDay() {
		n-- // the recent event shares the day's partition
	}
	if n != 0 {
		t.Errorf("an event past the retention was written (%d rows)", n)
	}
}

func TestHistoryPagesAcrossMonths(t *testing.T) {
	r := store(t).History()
	ctx := context.Background()
	user := rid("u")
	start := time.Date(2025, 10, 30, 12, 0, 0, 0, time.UTC)
	var want []string
	for i := 0; i < 7; i++ { // Oct 30 .. Jan 28, every 15 days: 4 months
		at := start.Add(time.Duration(i) * 15 * 24 * time.Hour)
		e := history.Entry{UserID: user, OrderID: rid("o"), PlacedAt: at, UpdatedAt: at, Status: order.Created, Total: money.MustParse("1.00")}
		if err := r.UpsertEntry(ctx, e); err != nil {
			t.Fatal(err)
		}
		want = append([]string{e.OrderID}, want...)
	}
	for _, limit := range []int{1, 2, 3, 7, 10} {
		var got []string
		req := paging.Request{Limit: limit}
		for i := 0; ; i++ {
			page, err := r.ListHistory(ctx, user, req)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Items) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(page.Items))
			}
			for _, e := range page.Items {
				got = append(got, e.OrderID)
			}
			if page.Next == "" || i > 20 {
				break
			}
			req.Cursor = page.Next
		}
		if len(got) != len(want) {
			t.Fatalf("limit %d: got %d entries, want %d", limit, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("limit %d: entry %d is %s, want %s (newest first across months)", limit, i, got[i], want[i])
			}
		}
	}
	// A cursor belongs to its query.
	page, err := r.ListHistory(ctx, user, paging.Request{Limit: 2})
	if err != nil || page.Next == "" {
		t.Fatal(page, err)
	}
	var ve *validation.Error
	if _, err := r.ListHistory(ctx, rid("u"), paging.Request{Limit: 2, Cursor: page.Next}); !errors.As(err, &ve) {
		t.Errorf("another user's cursor: got %v, want a validation error", err)
	}
	ev := store(t).Events()
	actor := "u:" + rid("u")
	for i := 0; i < 3; i++ {
		if err := ev.AppendEvent(ctx, event.Event{Actor: actor, Type: event.View, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	evPage, err := ev.ListEvents(ctx, event.Query{Actor: actor, Day: time.Now(), Page: paging.Request{Limit: 1}})
	if err != nil || evPage.Next == "" {
		t.Fatal(evPage, err)
	}
	if _, err := ev.ListEvents(ctx, event.Query{Actor: actor, Day: time.Now(), Type: event.Click, Page: paging.Request{Limit: 1, Cursor: evPage.Next}}); !errors.As(err, &ve) {
		t.Errorf("an events cursor reused with another filter: got %v, want a validation error", err)
	}
}

// TestDamagedCursor: a cursor whose paging state was tampered with is bad input (a
// validation error on "cursor"), not a server failure.
func TestDamagedCursor(t *testing.T) {
	ev := store(t).Events()
	ctx := context.Background()
	actor := "u:" + rid("u")
	for i := 0; i < 3; i++ {
		if err := ev.AppendEvent(ctx, event.Event{Actor: actor, Type: event.View, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	q := event.Query{Actor: actor, Day: time.Now(), Page: paging.Request{Limit: 1}}
	page, err := ev.ListEvents(ctx, q)
	if err != nil || page.Next == "" {
		t.Fatal(page, err)
	}
	var c driverCursor
	if err := paging.Decode(page.Next, &c); err != nil {
		t.Fatal(err)
	}
	for i := range c.S {
		c.S[i] ^= 0x5a
	}
	q.Page.Cursor = paging.Encode(c)
	var ve *validation.Error
	if _, err := ev.ListEvents(ctx, q); !errors.As(err, &ve) {
		t.Errorf("damaged paging state: got %v, want a validation error", err)
	}
}
