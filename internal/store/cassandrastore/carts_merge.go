package cassandrastore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
)

// Merge moves a guest cart into the user's: the guest cart is frozen ('merging') and its
// snapshot published, the user's cart is frozen by a merge token and its snapshot published,
// cart.MergeLines of the two snapshots becomes a new generation of the user's cart (merged_from
// records the guest cart), and the guest cart is abandoned. Each step is found done by a
// retried login, so the lines move exactly once.
func (r *carts) Merge(ctx context.Context, sessionID, userID string, now time.Time) (cart.MergeResult, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	guest, user := cart.Guest(sessionID), cart.User(userID)
	g, err := r.load(ctx, guest, r.p.levels().Carts)
	if err != nil {
		return cart.MergeResult{}, err
	}
	// A guest cart already merging into this user was left by a login that crashed or is
	// still running: finishing it is safe, merged_from says whether the lines moved.
	resume := g.hasActive() && g.c.Status == merging && g.mergeInto == userID
	if !g.live(now) && !resume {
		// Nothing to merge (no guest cart, or merged by an earlier login): a no-op.
		return r.userCart(ctx, userID, now, nil)
	}
	gid := g.c.ID
	// A login during a checkout is refused before the guest cart is touched; the user side's
	// freeze decides in a race.
	u, err := r.load(ctx, user, r.p.levels().Carts)
	if err != nil {
		return cart.MergeResult{}, err
	}
	if u.live(now) && !u.merged[gid] && u.c.CheckoutOrder != mergeToken(gid) && !u.mergingIn() {
		if err := r.refuse(ctx, u, now); err != nil {
			return cart.MergeResult{}, err
		}
	}
	if !resume {
		if g, err = r.freezeGuest(ctx, g, userID, now); err != nil || g.c.Status != merging {
			if err != nil {
				return cart.MergeResult{}, err
			}
			return r.userCart(ctx, userID, now, nil) // another login merged it first
		}
	}
	// Frozen: the guest's edits from now on answer by the snapshot.
	if g, err = r.publish(ctx, g); err != nil {
		if again, lerr := r.load(ctx, guest, r.p.levels().Serial); lerr == nil && !(again.hasActive() && again.active == g.active) {
			return r.userCart(ctx, userID, now, nil) // a racing login finished (or undid) it
		}
		return cart.MergeResult{}, err
	}
	uc, notMerged, err := r.mergeUserSide(ctx, userID, u, g, now)
	if err != nil {
		var stale *cart.StaleCheckoutError
		if errors.Is(err, cart.ErrCheckoutInProgress) || errors.As(err, &stale) {
			// Refused: the guest gets its cart back as the snapshot holds it, in a new
			// generation (guest edits refused meanwhile wrote into the frozen one only).
			if _, rerr := r.switchTo(ctx, g, g.snapshot, false, superseded, nil, now); rerr != nil && !errors.Is(rerr, errSwitchLost) {
				return cart.MergeResult{}, errors.Join(err, rerr)
			}
		}
		return cart.MergeResult{}, err
	}
	if err := r.abandonGuest(ctx, g, now); err != nil {
		return cart.MergeResult{}, err
	}
	if uc.ID != "" {
		return cart.MergeResult{Cart: uc, NotMerged: notMerged}, nil // as this call's switch left it
	}
	return r.userCart(ctx, userID, now, notMerged)
}

func (r *carts) userCart(ctx context.Context, userID string, now time.Time, notMerged []cart.Item) (cart.MergeResult, error) {
	c, err := r.ActiveCart(ctx, cart.User(userID), now)
	return cart.MergeResult{Cart: c, NotMerged: notMerged}, err
}

// freezeGuest sets the live guest cart g merging into userID and returns its new state; a
// returned status other than merging means another login took it first.
func (r *carts) freezeGuest(ctx context.Context, g cartState, userID string, now time.Time) (cartState, error) {
	n := now.UTC().Truncate(time.Millisecond)
	return casLoop(ctx, r.p, fmt.Sprintf("freeze guest cart %s for merge", g.c.ID), func(ctx context.Context, a casAttempt) (cartState, *casOp[cartState], error) {
		if a.n > 0 {
			again, err := r.load(ctx, g.owner, r.p.levels().Serial)
			if err != nil {
				return g, nil, err
			}
			switch {
			case again.active == g.active && again.c.Status == merging && again.mergeInto == userID:
				return again, nil, nil // ours after a timeout, or a racing login of the same user
			case again.active != g.active || !again.live(now):
				return again, nil, nil // merged, ended or expired meanwhile: nothing to merge
			}
			g = again
		}
		q := r.query(ctx, guestCarts.stmts.mergeFreeze, ttlUntil(g.c.ExpiresAt, time.Now()), userID, n,
			g.owner.SessionID, g.active, g.active, ts(now))
		return g, &casOp[cartState]{query: q, applied: func() cartState {
			g.c.Status, g.mergeInto = merging, userID
			return g
		}}, nil
	})
}

// mergeUserSide moves the frozen guest cart g's snapshot into the user's active cart by
// cart.MergeLines, once: a cart whose merged_from holds g was merged by an earlier attempt.
// The user's cart is frozen by the merge token first (user edits racing it are redone in
// the new generation, checkouts wait for it), and its snapshot is what the guest's lines
// join.
// It returns the user's cart as its switch (or creation) left it, with no ID if an earlier
// attempt merged it.
func (r *carts) mergeUserSide(ctx context.Context, userID string, seen, g cartState, now time.Time) (cart.Cart, []cart.Item, error) {
	user := cart.User(userID)
	if !seen.hasActive() {
		// No user cart: the guest's lines become a new one, merged_from recording the guest
		// cart in the LWT creating it.
		merged, notMerged := cart.MergeLines(nil, liveItems(g.snapshot))
		st, created, err := r.createWith(ctx, user, time.Time{}, now, r.p.levels().Carts, toLines(merged, nil), []string{g.c.ID}, &seen)
		if err != nil || created {
			return st.c, notMerged, err
		}
	}
	token := mergeToken(g.c.ID)
	until := now.Add(cart.CheckoutLease)
	u, err := casLoop(ctx, r.p, fmt.Sprintf("freeze user %s cart for the merge of guest cart %s", userID, g.c.ID), func(ctx context.Context, a casAttempt) (cartState, *casOp[cartState], error) {
		u, err := r.ensureActive(ctx, user, time.Time{}, now, a.cl)
		for err == nil && u.mergingIn() && u.c.CheckoutOrder != token {
			if _, err = r.awaitSwitch(ctx, u, now); err == nil { // another login's merge
				u, err = r.ensureActive(ctx, user, time.Time{}, now, a.cl)
			}
		}
		if err != nil || u.merged[g.c.ID] || u.c.CheckoutOrder == token {
			return u, nil, err // merged already, or frozen for it by an earlier attempt
		}
		if err := r.refuse(ctx, u, now); err != nil {
			return u, nil, err
		}
		q := r.query(ctx, userCarts.stmts.freeze, 0, token, ts(until), userID, u.active, u.active)
		return u, &casOp[cartState]{query: q, applied: func() cartState {
			u.c.CheckoutOrder, u.c.CheckoutUntil = token, until.UTC().Truncate(time.Millisecond)
			return u
		}}, nil
	})
	if err != nil {
		return cart.Cart{}, nil, err
	}
	if u.merged[g.c.ID] {
		return cart.Cart{}, nil, nil // what did not fit was the earlier attempt's answer
	}
	if u, err = r.publish(ctx, u); err != nil {
		return cart.Cart{}, nil, err
	}
	merged, notMerged := cart.MergeLines(liveItems(u.snapshot), liveItems(g.snapshot))
	lines := toLines(merged, u.snapshot)
	froms := []string{g.c.ID}
	for m := range u.merged {
		froms = append(froms, m)
	}
	c, err := r.switchTo(ctx, u, lines, false, superseded, froms, now)
	if errors.Is(err, errSwitchLost) {
		// Another attempt of this login switched it, or not: only merged_from tells.
		again, lerr := r.load(ctx, user, r.p.levels().Serial)
		if lerr != nil {
			return cart.Cart{}, nil, lerr
		}
		if !again.merged[g.c.ID] {
			return cart.Cart{}, nil, fmt.Errorf("merge guest cart %s into user %s: %w", g.c.ID, userID, err)
		}
		return cart.Cart{}, notMerged, nil
	}
	return c, notMerged, err
}

// abandonGuest ends the merged guest cart; if another login abandoned it first, that is the
// same outcome.
func (r *carts) abandonGuest(ctx context.Context, g cartState, now time.Time) error {
	n := now.UTC().Truncate(time.Millisecond)
	_, err := casLoop(ctx, r.p, fmt.Sprintf("abandon guest cart %s", g.c.ID), func(ctx context.Context, a casAttempt) (struct{}, *casOp[struct{}], error) {
		if a.n > 0 {
			again, err := r.load(ctx, g.owner, r.p.levels().Serial)
			if err != nil || again.active != g.physical() {
				return struct{}{}, nil, err
			}
		}
		q := r.query(ctx, guestCarts.stmts.abandon, ttlUntil(g.c.ExpiresAt, time.Now()), n, g.owner.SessionID, g.physical(), g.physical())
		return struct{}{}, casDo(q), nil
	})
	return err
}

// toLines are items as lines to write; one unchanged from a line of was keeps its writetime,
// the others get new ones when written.
func toLines(items []cart.Item, was []snapLine) []snapLine {
	old := make(map[string]snapLine, len(was))
	for _, l := range was {
		old[l.ProductID] = l
	}
	lines := make([]snapLine, 0, len(items))
	for _, it := range items {
		l := snapLine{ProductID: it.ProductID, Category: it.Category, Quantity: it.Quantity, AddedAt: it.AddedAt}
		if o, ok := old[it.ProductID]; ok && o.Quantity == it.Quantity {
			l.Written = o.Written
		}
		lines = append(lines, l)
	}
	return lines
}
