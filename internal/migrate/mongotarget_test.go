package migrate

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// mongoTarget is a MongoDB target in a fresh database of the shared set (mongoStore), and the
// shop's repositories over it.
func mongoTarget(t *testing.T) (*MongoTarget, *mongostore.Store) {
	t.Helper()
	st, _ := mongoStore(t)
	return NewMongoTarget(st), st
}

// embeddedShop is a fresh embedded store and a migration source over it.
func embeddedShop(t *testing.T) (*sqlitestore.DB, *Source) {
	t.Helper()
	path, db := seedWhole(t)
	src, err := OpenSource(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return db, src
}

func newSession(id string, now time.Time) session.Session {
	return session.Session{ID: id, CreatedAt: now.Add(-time.Hour), LastActive: now.Add(-time.Minute), ExpiresAt: now.Add(24 * time.Hour),
		IP: "10.0.0.1", UserAgent: "test", Status: session.StatusActive, Data: map[string]string{}}
}

// The ordering rule: a session the backfill read before a dual write never overwrites the dual
// write's copy, whichever reaches MongoDB last, and replaying the backfill changes nothing; a
// history entry older than the stored one loses too.
func TestMongoBackfillOlderThanDualWriteLoses(t *testing.T) {
	ctx := context.Background()
	db, src := embeddedShop(t)
	dst, st := mongoTarget(t)
	now := time.Now().UTC().Truncate(time.Millisecond)
	if err := db.Sessions().CreateSession(ctx, newSession("s-bind", now)); err != nil {
		t.Fatal(err)
	}
	// The backfill reads the anonymous session...
	stale, err := src.Read(ctx, Sessions, keyOnly("s-bind"))
	if err != nil || len(stale) != 1 {
		t.Fatalf("read: %v, %d rows", err, len(stale))
	}
	// ...the shop binds it (BindUser leaves last_active, the row's Modified, as it was) and the
	// dual write copies it...
	if _, err := db.Sessions().BindUser(ctx, "s-bind", "u-1", now); err != nil {
		t.Fatal(err)
	}
	m := &MongoMirror{Src: src, Dst: dst}
	if err := m.Keys(ctx, Sessions, "s-bind"); err != nil {
		t.Fatal(err)
	}
	// ...and the backfill's write lands after it, twice.
	for range 2 {
		if _, err := dst.Write(ctx, Sessions, stale, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.Sessions().GetSession(ctx, "s-bind", time.Now())
	if err != nil || got.UserID != "u-1" {
		t.Fatalf("session after the late backfill write: %+v, %v; want the dual write's user u-1", got, err)
	}
	// A backfill row newer than what MongoDB holds does replace it.
	newer := stale[0]
	s := *newer.Session
	s.UserAgent, s.LastActive = "newer", time.Now().Add(time.Hour)
	newer.Session, newer.Modified = &s, s.LastActive
	if _, err := dst.Write(ctx, Sessions, []Row{newer}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Sessions().GetSession(ctx, "s-bind", time.Now()); got.UserAgent != "newer" {
		t.Fatalf("a newer row did not replace the document: %+v", got)
	}

	// History: the shop's newer status (the dual write is UpsertEntry) beats an older backfill.
	e := history.Entry{UserID: "u-9", OrderID: "o-9", PlacedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Hour), Status: order.Paid, Zone: "eu-west", Total: 100}
	paid := Row{Key: e.OrderID, Entry: &e, Modified: e.UpdatedAt}
	shipped := e
	shipped.Status, shipped.UpdatedAt = order.Shipped, now
	if err := st.History().UpsertEntry(ctx, shipped); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.Write(ctx, History, []Row{paid}, time.Now()); err != nil {
		t.Fatal(err)
	}
	page, err := st.History().ListHistory(ctx, "u-9", paging.Request{Limit: 5})
	if err != nil || len(page.Items) != 1 || page.Items[0].Status != order.Shipped {
		t.Fatalf("history after the late backfill write: %+v, %v; want shipped", page.Items, err)
	}
}

// A session revoked while the backfill runs stays deleted, whether the backfill's write of it
// lands before or after the dual write's delete; a later write of it (a new state) is kept.
func TestMongoDeleteDuringBackfillNotResurrected(t *testing.T) {
	ctx := context.Background()
	db, src := embeddedShop(t)
	dst, st := mongoTarget(t)
	now := time.Now().UTC()
	m := &MongoMirror{Src: src, Dst: dst}
	for _, order := range []string{"write-then-delete", "delete-then-write"} {
		id := "s-" + order
		if err := db.Sessions().CreateSession(ctx, newSession(id, now)); err != nil {
			t.Fatal(err)
		}
		read, err := src.Read(ctx, Sessions, keyOnly(id))
		if err != nil || len(read) != 1 {
			t.Fatalf("read: %v, %d rows", err, len(read))
		}
		if err := db.Sessions().Revoke(ctx, id); err != nil {
			t.Fatal(err)
		}
		steps := []func() error{
			func() error { _, err := dst.Write(ctx, Sessions, read, time.Now()); return err },
			func() error { return m.Keys(ctx, Sessions, id) },
		}
		if order == "delete-then-write" {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, step := range steps {
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.Sessions().GetSession(ctx, id, time.Now()); !errors.Is(err, session.ErrNotFound) {
			t.Fatalf("%s: the revoked session is back in MongoDB (%v)", order, err)
		}
	}
	// A replayed range finds the tombstone again.
	rows := []Row{{Key: "s-write-then-delete", Session: &session.Session{ID: "s-write-then-delete", CreatedAt: now.Add(-time.Hour),
		LastActive: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour), Status: session.StatusActive, Data: map[string]string{}}}}
	stampRows(registry[Sessions], rows, 0)
	if _, err := dst.Write(ctx, Sessions, rows, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Sessions().GetSession(ctx, "s-write-then-delete", time.Now()); !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("a replayed range resurrected a revoked session (%v)", err)
	}
	// A state newer than the delete is a session again (the tombstone only removes older ones).
	rows[0].Modified = time.Now().Add(time.Minute)
	if _, err := dst.Write(ctx, Sessions, rows, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Sessions().GetSession(ctx, "s-write-then-delete", time.Now()); err != nil {
		t.Fatalf("a write newer than the tombstone was deleted: %v", err)
	}
}

// A backfill into MongoDB stopped after some ranges resumes with the others (no range copied
// twice, none missed), verifies with zero differences, and the state moves through its phases
// with the same compare-and-set rules as in Cassandra.
func TestMongoBackfillResumeVerifyPhases(t *testing.T) {
	ctx := context.Background()
	db, src := embeddedShop(t)
	dst, st := mongoTarget(t)
	now := time.Now().UTC()
	for i := range 60 {
		if err := db.Sessions().CreateSession(ctx, newSession(fmt.Sprintf("s-%03d", i), now)); err != nil {
			t.Fatal(err)
		}
		owner := cart.Guest(fmt.Sprintf("s-%03d", i))
		if i%2 == 0 {
			owner = cart.User(fmt.Sprint("u-", i))
		}
		if _, err := db.Carts().PutItem(ctx, owner, cart.Item{ProductID: "p-001", Category: "toys", Quantity: int64(1 + i%3), AddedAt: now}, now.Add(time.Hour), now); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dst.BeginCopy(ctx, Catalog, FromSQLite, "", true); err == nil {
		t.Fatal("BeginCopy accepted the catalog, which does not move to mongo with dual writes")
	}
	for _, f := range MongoFamilies {
		start, err := dst.BeginCopy(ctx, f, FromSQLite, "", false)
		if err == nil {
			t.Fatalf("%s: began with no shop process following the state and no --offline: %+v", f, start)
		}
		if start, err = dst.BeginCopy(ctx, f, FromSQLite, "", true); err != nil || !start.Started {
			t.Fatalf("%s: begin: %+v, %v", f, start, err)
		}
		stopCtx, stop := context.WithCancel(ctx)
		copied := 0
		first, err := Backfill(stopCtx, src, dst, f, Options{Run: start.State.Run, Split: 6, Workers: 1, AfterCheckpoint: func(Range) {
			if copied++; copied == 2 {
				stop()
			}
		}})
		stop()
		if err == nil {
			t.Fatalf("%s: the stopped run finished", f)
		}
		cps, err := dst.Checkpoints(ctx, start.State.Run, f)
		if err != nil || len(cps) != 2 {
			t.Fatalf("%s: %d checkpoints after stopping at 2 (%v)", f, len(cps), err)
		}
		again, err := dst.BeginCopy(ctx, f, FromSQLite, "", true)
		if err != nil || !again.Resumed {
			t.Fatalf("%s: resume: %+v, %v", f, again, err)
		}
		second, err := Backfill(ctx, src, dst, f, Options{Run: again.State.Run, Split: 6, Workers: 2})
		if err != nil || second.Resume != 2 || second.Ranges != first.Ranges {
			t.Fatalf("%s: resumed run: %+v, %v; want 2 of %d ranges done before", f, second, err, first.Ranges)
		}
		if err := dst.FinishCopy(ctx, again.State); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(ctx, src, dst, f, Options{Split: 6})
		if err != nil || rep.SourceRows == 0 || rep.SourceRows != rep.TargetRows {
			t.Fatalf("%s: verify: %v, %d/%d rows, diffs %v", f, err, rep.SourceRows, rep.TargetRows, rep.Diffs)
		}
		if ok, err := dst.MarkVerified(ctx, f, int64(rep.SourceRows)); !ok || err != nil {
			t.Fatalf("%s: mark verified: %v, %v", f, ok, err)
		}
		if _, err := dst.Rollback(ctx, f); !errors.Is(err, ErrPhase) {
			t.Fatalf("%s: rollback of a verified family: %v, want ErrPhase", f, err)
		}
		if s, err := dst.Cutover(ctx, f); err != nil || s.Phase != Cutover {
			t.Fatalf("%s: cutover: %+v, %v", f, s, err)
		}
		if s, err := dst.Rollback(ctx, f); err != nil || s.Phase != Copied {
			t.Fatalf("%s: rollback: %+v, %v", f, s, err)
		}
	}
	// A difference is found and repaired with the dual write's rule.
	if err := db.Sessions().Revoke(ctx, "s-007"); err != nil {
		t.Fatal(err)
	}
	if err := db.Sessions().Touch(ctx, "s-008", time.Now()); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(ctx, src, dst, Sessions, Options{Split: 6})
	if !errors.Is(err, ErrDifferences) || len(rep.Diffs) != 2 {
		t.Fatalf("verify after a revoke and a touch: %v, diffs %v", err, rep.Diffs)
	}
	if err := dst.Repair(ctx, src, Sessions, rep.Diffs); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(ctx, src, dst, Sessions, Options{Split: 6}); err != nil {
		t.Fatalf("verify after repair: %v, %v", err, rep.Diffs)
	}
	if _, err := st.Sessions().GetSession(ctx, "s-009", time.Now()); err != nil {
		t.Fatalf("the shop's repository does not read a migrated session: %v", err)
	}
}

// A cart moves between its owner's slot and its own id as its status changes: a backfilled
// copy of a cart read while active never leaves a second, stale copy next to the ordered one
// the dual write wrote, whichever lands last, and verify finds both stores equal.
func TestMongoCartBackfillAfterDualWriteKeepsOneCopy(t *testing.T) {
	ctx := context.Background()
	db, src := embeddedShop(t)
	dst, st := mongoTarget(t)
	m := &MongoMirror{Src: src, Dst: dst}
	cases := []struct {
		order   string
		newCart bool // the owner starts cart B after ordering A
	}{{"dual-write-first", false}, {"backfill-first", false}, {"dual-write-first", true}, {"backfill-first", true}}
	for i, tc := range cases {
		name := fmt.Sprintf("%s, new cart %v", tc.order, tc.newCart)
		owner := cart.User(fmt.Sprint("buyer-", i))
		now := time.Now().UTC()
		a, err := db.Carts().PutItem(ctx, owner, cart.Item{ProductID: "p-001", Category: "toys", Quantity: 1, AddedAt: now}, time.Time{}, now)
		if err != nil {
			t.Fatal(err)
		}
		stale, err := src.Read(ctx, Carts, keyOnly(a.ID)) // the backfill reads cart A, active
		if err != nil || len(stale) != 1 {
			t.Fatalf("read: %v, %d rows", err, len(stale))
		}
		// The shop orders A (and may start cart B); the dual write copies them.
		if err := db.Carts().MarkOrdered(ctx, owner, a.ID, fmt.Sprint("o-", i), now.Add(time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		ids := []string{a.ID}
		var b cart.Cart
		if tc.newCart {
			if b, err = db.Carts().PutItem(ctx, owner, cart.Item{ProductID: "p-002", Category: "toys", Quantity: 2, AddedAt: now}, time.Time{}, now.Add(2*time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, b.ID)
		}
		steps := []func() error{
			func() error { return m.Carts(ctx, owner, ids...) },
			func() error { _, err := dst.Write(ctx, Carts, stale, time.Now()); return err },
		}
		if tc.order == "backfill-first" {
			steps[0], steps[1] = steps[1], steps[0]
		}
		for _, step := range steps {
			if err := step(); err != nil {
				t.Fatal(err)
			}
		}
		active, err := st.Carts().ActiveCart(ctx, owner, time.Now())
		switch {
		case tc.newCart && (err != nil || active.ID != b.ID || len(active.Items) != 1 || active.Items[0].Quantity != 2):
			t.Fatalf("%s: active cart %+v, %v; want cart B with 2 of p-002", name, active, err)
		case !tc.newCart && !errors.Is(err, cart.ErrNotFound):
			t.Fatalf("%s: active cart %+v, %v; want none (A is ordered)", name, active, err)
		}
		copies := 0
		if err := dst.Scan(ctx, Carts, func(r Row) error {
			if r.Key == a.ID {
				copies++
				if r.Cart.Status != cart.Ordered {
					t.Errorf("%s: cart A in MongoDB is %s, want ordered", name, r.Cart.Status)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if copies != 1 {
			t.Fatalf("%s: cart A is stored %d times in MongoDB, want once", name, copies)
		}
	}
	if rep, err := Verify(ctx, src, dst, Carts, Options{Split: 4}); err != nil || rep.SourceRows != 6 {
		t.Fatalf("verify carts: %v, %d rows, diffs %v", err, rep.SourceRows, rep.Diffs)
	}
}
