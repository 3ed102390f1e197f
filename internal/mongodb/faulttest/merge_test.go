package faulttest

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/cart"
)

// rawCart is a cart document as stored (the store's carts collection).
type rawCart struct {
	ID     string    `bson:"_id"`
	CartID string    `bson:"cart_id"`
	Status string    `bson:"status"`
	Items  []rawItem `bson:"items"`
}

func (c *rawCart) lines() map[string]int64 {
	if c == nil {
		return nil
	}
	m := map[string]int64{}
	for _, it := range c.Items {
		m[it.ProductID] += it.Quantity
	}
	return m
}

// distinctLines reports whether no product appears twice among the cart's lines.
func (c *rawCart) distinctLines() bool { return c == nil || len(c.lines()) == len(c.Items) }

func (c *rawCart) String() string {
	if c == nil {
		return "none"
	}
	return fmt.Sprintf("{%s %s %v}", c.CartID, c.Status, c.lines())
}

func sameCart(a, b *rawCart) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.CartID == b.CartID && a.Status == b.Status && len(a.Items) == len(b.Items) && maps.Equal(a.lines(), b.lines())
}

// cartState is the two cart slots a merge touches, plus the user's retired cart if any.
type cartState struct {
	guest, user, retired *rawCart
}

// readCarts reads the guest's and the user's slots (primary, majority) and the retired copy
// of the user's cart retiredID when given.
func readCarts(ctx context.Context, db, sid, uid, retiredID string) (cartState, error) {
	var st cartState
	err := retry(ctx, "read carts", func(ctx context.Context) error {
		st = cartState{}
		coll := checker.Database(db).Collection("carts")
		ids := bson.A{"active:s:" + sid, "active:u:" + uid}
		if retiredID != "" {
			ids = append(ids, retiredID)
		}
		cur, err := coll.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
		if err != nil {
			return err
		}
		var docs []rawCart
		if err := cur.All(ctx, &docs); err != nil {
			return err
		}
		for i := range docs {
			switch docs[i].ID {
			case "active:s:" + sid:
				st.guest = &docs[i]
			case "active:u:" + uid:
				st.user = &docs[i]
			default:
				st.retired = &docs[i]
			}
		}
		return nil
	})
	return st, err
}

// mergedLines is CRT-5's expected result: the user's lines (if the cart is live) plus the
// guest's, quantities added.
func mergedLines(user *rawCart, guest *rawCart) map[string]int64 {
	out := map[string]int64{}
	if user != nil && user.Status == string(cart.Active) {
		maps.Copy(out, user.lines())
	}
	for p, q := range guest.lines() {
		out[p] = min(out[p]+q, cart.MaxQuantity) // the carts here are far from MaxItems
	}
	return out
}

// mergeApplied reports whether after is before with the merge applied exactly once: the guest
// cart abandoned with its lines, the user's live cart holding user + guest lines (a finished
// user cart retired to its cart id, unchanged, and a new cart in the slot).
func mergeApplied(before, after cartState) bool {
	g, u := after.guest, after.user
	if g == nil || g.CartID != before.guest.CartID || g.Status != string(cart.Abandoned) || !maps.Equal(g.lines(), before.guest.lines()) {
		return false
	}
	if u == nil || u.Status != string(cart.Active) || !u.distinctLines() || !maps.Equal(u.lines(), mergedLines(before.user, before.guest)) {
		return false
	}
	switch {
	case before.user == nil:
		return true
	case before.user.Status == string(cart.Active):
		return u.CartID == before.user.CartID
	default: // retired: a new cart, the old one kept as it was under its id
		r := after.retired
		return u.CartID != before.user.CartID && r != nil && r.CartID == before.user.CartID &&
			r.Status == before.user.Status && maps.Equal(r.lines(), before.user.lines())
	}
}

// mergeUntouched reports whether nothing of the merge is visible.
func mergeUntouched(before, after cartState) bool {
	return sameCart(before.guest, after.guest) && sameCart(before.user, after.user) && sameCart(before.retired, after.retired)
}

// TestCartMergeUnderStepDownAppliesOnceOrNotAtAll: workers merge fresh guest carts into user
// carts (CRT-5, cart.Repository.Merge, what login runs) over and over while the primary is
// stepped down, round after round. Each merge either returns nil with the merge applied
// exactly once (guest cart abandoned with its lines, user cart = user + guest lines), or
// returns an error with nothing applied; a retry after an error (the client logging in again)
// then applies it exactly once, and a repeated login after success changes nothing. Three
// kinds of user cart: none, a live one sharing a product with the guest, and an ordered one
// (retired to its id by the merge).
func TestCartMergeUnderStepDownAppliesOnceOrNotAtAll(t *testing.T) {
	ctx := start(t)
	s, db := openStore(t, ctx, "merge")
	carts := s.Carts()
	const (
		rounds   = 16
		workers  = 4
		maxTries = 60
	)
	tl := &tally{}
	stats := &roundStats{}
	try := func(ctx context.Context, w, round, i int) {
		sid, uid := fmt.Sprintf("ms-%d-%d-%d", round, w, i), fmt.Sprintf("mu-%d-%d-%d", round, w, i)
		kind := (round + w + i) % 3
		guestLines := map[string]int64{"mp-a": int64(1 + i%3), fmt.Sprintf("mp-%d", w): 2}
		if i%2 == 0 {
			guestLines["mp-c"] = 1
		}
		expires := time.Now().Add(time.Hour)
		for p, q := range guestLines {
			if err := retry(ctx, "fill guest cart", func(ctx context.Context) error {
				_, err := carts.PutItem(ctx, cart.Guest(sid), cart.Item{ProductID: p, Category: "c", Quantity: q, AddedAt: time.Now()}, expires, time.Now())
				return err
			}); err != nil {
				tl.fail("%s: setup: %v", sid, err)
				return
			}
		}
		if kind > 0 { // a user cart sharing mp-a with the guest, plus a line of its own
			for p, q := range map[string]int64{"mp-a": 5, "mp-u": 1} {
				if err := retry(ctx, "fill user cart", func(ctx context.Context) error {
					_, err := carts.PutItem(ctx, cart.User(uid), cart.Item{ProductID: p, Category: "c", Quantity: q, AddedAt: time.Now()}, time.Time{}, time.Now())
					return err
				}); err != nil {
					tl.fail("%s: setup: %v", uid, err)
					return
				}
			}
		}
		var retiredID string
		if kind == 2 { // the user's cart was ordered: the merge starts a new one
			c, err := carts.ActiveCart(ctx, cart.User(uid), time.Now())
			if err == nil {
				retiredID = c.ID
				err = retry(ctx, "order user cart", func(ctx context.Context) error {
					return carts.MarkOrdered(ctx, cart.User(uid), c.ID, "order-"+uid, time.Now())
				})
			}
			if err != nil {
				tl.fail("%s: setup: %v", uid, err)
				return
			}
		}
		before, err := readCarts(ctx, db, sid, uid, retiredID)
		if err != nil || before.guest == nil || !maps.Equal(before.guest.lines(), guestLines) {
			tl.fail("%s: setup not visible at majority: %+v, %v", sid, before, err)
			return
		}

		tl.tried.Add(1)
		mctx, cancel := context.WithTimeout(ctx, budget(i))
		began := time.Now()
		_, err = carts.Merge(mctx, sid, uid, time.Now())
		ended := time.Now()
		cancel()
		if stats.inFlight(began, ended) {
			tl.inFlight.Add(1)
		}
		if ended.Sub(began) > 300*time.Millisecond {
			tl.slow.Add(1)
		}
		after, rerr := readCarts(ctx, db, sid, uid, retiredID)
		if rerr != nil {
			tl.fail("%s: %v", sid, rerr)
			return
		}
		switch ok, untouched := mergeApplied(before, after), mergeUntouched(before, after); {
		case err == nil && ok:
			tl.applied.Add(1)
		case err == nil:
			tl.fail("%s (user cart %s): merge returned nil but state is guest %s user %s retired %s (before: guest %s user %s)",
				sid, []string{"none", "live", "ordered"}[kind], after.guest, after.user, after.retired, before.guest, before.user)
			return
		case untouched:
			tl.cleanFail.Add(1)
			tl.errKinds.add(err)
		case ok:
			tl.fail("%s: merge returned %v but it was applied", sid, err)
			tl.errKinds.add(err)
		default:
			tl.fail("%s (user cart %s): merge returned %v and left a half-applied state: guest %s user %s retired %s (before: guest %s user %s)",
				sid, []string{"none", "live", "ordered"}[kind], err, after.guest, after.user, after.retired, before.guest, before.user)
			return
		}
		if err != nil { // the client logs in again until the merge goes through
			if err := retry(ctx, "merge again", func(ctx context.Context) error {
				_, err := carts.Merge(ctx, sid, uid, time.Now())
				return err
			}); err != nil {
				tl.fail("%s: retried merge: %v", sid, err)
				return
			}
			if after, err = readCarts(ctx, db, sid, uid, retiredID); err != nil {
				tl.fail("%s: %v", sid, err)
				return
			}
			if !mergeApplied(before, after) {
				tl.fail("%s: after a failed merge and a retry: guest %s user %s retired %s (before: guest %s user %s)",
					sid, after.guest, after.user, after.retired, before.guest, before.user)
				return
			}
			tl.retriedOK.Add(1)
		}
		// A repeated login merges nothing more.
		if err := retry(ctx, "merge once more", func(ctx context.Context) error {
			_, err := carts.Merge(ctx, sid, uid, time.Now())
			return err
		}); err != nil {
			tl.fail("%s: repeated merge: %v", sid, err)
			return
		}
		if again, err := readCarts(ctx, db, sid, uid, retiredID); err != nil || !mergeUntouched(after, again) {
			tl.fail("%s: a repeated merge changed the carts: user %s → %s, %v", sid, after.user, again.user, err)
		}
	}
	began := time.Now()
	underStepDowns(t, ctx, db, rounds, workers, maxTries, stats, try)
	t.Logf("%s, in %s", stats, time.Since(began).Round(100*time.Millisecond))
	t.Logf("merges: %d tried, %d in flight when a step-down was sent, %d took over 300 ms; %d applied once and returned nil, %d failed cleanly (nothing applied) and were then applied once by a retry (%d); errors: %s",
		tl.tried.Load(), tl.inFlight.Load(), tl.slow.Load(), tl.applied.Load(), tl.cleanFail.Load(), tl.retriedOK.Load(), &tl.errKinds)
	tl.check(t, stats, rounds, "merge")
}
