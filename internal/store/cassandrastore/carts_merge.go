package cassandrastore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
)

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
	// condition decides in a race.
	u, err := r.load(ctx, user, r.p.levels().Carts)
	if err != nil {
		return cart.MergeResult{}, err
	}
	if u.live(now) && !u.merged[gid] {
		if err := u.c.Editable(now); err != nil {
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
	// Frozen: the guest's lines can no longer change. SERIAL sees every edit Paxos applied
	// before the freeze.
	g, err = r.load(ctx, guest, r.p.levels().Serial)
	if err != nil {
		return cart.MergeResult{}, err
	}
	if g.c.ID != gid || g.c.Status != merging || g.mergeInto != userID {
		return r.userCart(ctx, userID, now, nil) // a racing login finished (or undid) it
	}
	notMerged, err := r.mergeUserSide(ctx, userID, g, now)
	if err != nil {
		var stale *cart.StaleCheckoutError
		if errors.Is(err, cart.ErrCheckoutInProgress) || errors.As(err, &stale) {
			if rerr := r.unfreezeGuest(ctx, g, userID, now); rerr != nil {
				return cart.MergeResult{}, errors.Join(err, rerr)
			}
		}
		return cart.MergeResult{}, err
	}
	if err := r.abandonGuest(ctx, g, now); err != nil {
		return cart.MergeResult{}, err
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

// unfreezeGuest gives the guest its cart back when the user's side refused the merge.
func (r *carts) unfreezeGuest(ctx context.Context, g cartState, userID string, now time.Time) error {
	n := now.UTC().Truncate(time.Millisecond)
	_, err := casLoop(ctx, r.p, fmt.Sprintf("unfreeze guest cart %s", g.c.ID), func(ctx context.Context, a casAttempt) (struct{}, *casOp[struct{}], error) {
		if a.refused {
			return struct{}{}, nil, nil // no longer merging into this user
		}
		if a.n > 0 { // the last attempt's outcome is unknown
			again, err := r.load(ctx, g.owner, r.p.levels().Serial)
			if err != nil || again.active != g.active || again.c.Status != merging {
				return struct{}{}, nil, err
			}
		}
		q := r.query(ctx, guestCarts.stmts.mergeRelease, ttlUntil(g.c.ExpiresAt, time.Now()), n,
			g.owner.SessionID, g.active, g.active, userID)
		return struct{}{}, casDo(q), nil
	})
	return err
}

// mergeUserSide moves the frozen guest cart g's lines into the user's active cart by
// cart.MergeLines, once: a cart whose merged_from holds g was merged by an earlier attempt.
func (r *carts) mergeUserSide(ctx context.Context, userID string, g cartState, now time.Time) ([]cart.Item, error) {
	n := now.UTC().Truncate(time.Millisecond)
	var notMerged []cart.Item // of the last attempt, the one that may have landed unseen
	return casLoop(ctx, r.p, fmt.Sprintf("merge guest cart %s into user %s", g.c.ID, userID), func(ctx context.Context, a casAttempt) ([]cart.Item, *casOp[[]cart.Item], error) {
		u, err := r.ensureActive(ctx, cart.User(userID), time.Time{}, now, a.cl)
		if err != nil {
			return nil, nil, err
		}
		if u.merged[g.c.ID] {
			return notMerged, nil, nil
		}
		if err := u.c.Editable(now); err != nil {
			return nil, nil, err
		}
		var merged []cart.Item
		merged, notMerged = cart.MergeLines(u.c.Items, g.c.Items)
		seq, prevSeq := 1, any(nil)
		if u.mergeSeq != nil {
			seq, prevSeq = *u.mergeSeq+1, *u.mergeSeq
		}
		b := r.batch(ctx)
		b.Query(userCarts.stmts.mergeHeader, []string{g.c.ID}, seq, n, userID, u.active, u.active, prevSeq)
		for _, it := range merged {
			switch i := lineAt(u.c.Items, it.ProductID); {
			case i < 0:
				b.Query(userCarts.stmts.putNew, 0, it.Category, it.Quantity, ts(it.AddedAt), userID, u.active, it.ProductID)
			case u.c.Items[i].Quantity != it.Quantity:
				b.Query(userCarts.stmts.putQty, 0, it.Quantity, userID, u.active, it.ProductID)
			}
		}
		return nil, &casOp[[]cart.Item]{batch: b, applied: func() []cart.Item { return notMerged }}, nil
	})
}

// abandonGuest ends the merged guest cart; if another login abandoned it first, that is the
// same outcome.
func (r *carts) abandonGuest(ctx context.Context, g cartState, now time.Time) error {
	n := now.UTC().Truncate(time.Millisecond)
	_, err := casLoop(ctx, r.p, fmt.Sprintf("abandon guest cart %s", g.c.ID), func(ctx context.Context, a casAttempt) (struct{}, *casOp[struct{}], error) {
		if a.n > 0 {
			again, err := r.load(ctx, g.owner, r.p.levels().Serial)
			if err != nil || again.active != g.active {
				return struct{}{}, nil, err
			}
		}
		q := r.query(ctx, guestCarts.stmts.abandon, ttlUntil(g.c.ExpiresAt, time.Now()), n, g.owner.SessionID, g.active, g.active)
		return struct{}{}, casDo(q), nil
	})
	return err
}
