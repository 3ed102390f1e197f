package cassandrastore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cart"
)

// lineClock is the last client timestamp (µs) this process gave a line write: each write gets
// a later one, so of two edits of one line in this process the later always wins.
var lineClock atomic.Int64

func nextLineTS() int64 {
	for {
		last, now := lineClock.Load(), time.Now().UnixMicro()
		if now <= last {
			now = last + 1
		}
		if lineClock.CompareAndSwap(last, now) {
			return now
		}
	}
}

const (
	// snapshotWait is how long a reader of a frozen cart waits for its freezer to publish the
	// snapshot before publishing one itself (any read after the freeze is a valid snapshot;
	// the first published wins, and the freezer's order then holds that one).
	snapshotWait = 300 * time.Millisecond
	// mergeWait bounds the wait for a login's merge into a user's cart to switch it.
	mergeWait = 2 * time.Second
	// maxEditRounds bounds an edit's redos in a generation that replaced the one it wrote into.
	maxEditRounds = 8
)

// pause sleeps for backoff (doubled, up to 100 ms, for the next call) or until ctx ends.
func pause(ctx context.Context, backoff *time.Duration) error {
	t := time.NewTimer(*backoff)
	defer t.Stop()
	*backoff = min(2**backoff, 100*time.Millisecond)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// edit writes line (Quantity 0: a removal) into the owner's cart and acknowledges it only if
// it is in the cart for good: the fence read after the write finds the generation it wrote
// into still the active one and not frozen (then every freeze's read holds the write), or a
// freeze's snapshot holding it. A write into a generation a freeze's snapshot does not hold
// is refused while the freeze holds the cart, and redone in the generation that replaced it
// otherwise: it is in nothing, as no snapshot holds it and no reader reads a dead generation.
func (r *carts) edit(ctx context.Context, owner cart.Owner, line snapLine, expiresAt, now time.Time) (cart.Cart, error) {
	t, key := tableFor(owner)
	what := fmt.Sprintf("put item in %s cart", owner.Key())
	if line.Quantity == 0 {
		what = fmt.Sprintf("remove item from %s cart", owner.Key())
	}
	for round := 0; round < maxEditRounds; round++ {
		h, ok := r.hint(owner)
		if !ok {
			st, created, err := r.editable(ctx, owner, line, expiresAt, now)
			if err != nil || created {
				return st.c, err
			}
			if h, ok = r.hint(owner); !ok || h.id != st.active {
				h = cartHint{id: st.active, expires: st.c.ExpiresAt}
			}
		}
		w := line
		if w.Quantity > 0 {
			if at, ok := h.added[w.ProductID]; ok {
				w.AddedAt = at
			} else if len(h.added) >= cart.MaxItems {
				// Soft: h is this process's last read, and two lines added at once can both pass.
				return cart.Cart{}, cart.ErrTooManyItems
			}
		}
		w.Written = nextLineTS()
		ttl := ttlUntil(h.expires, time.Now())
		var q *gocql.Query
		if w.Quantity > 0 {
			q = r.query(ctx, t.stmts.line, ttl, w.Written, w.Category, w.Quantity, ts(w.AddedAt), key, h.id, w.ProductID)
		} else {
			q = r.query(ctx, t.stmts.removal, ttl, w.Written, key, h.id, w.ProductID)
		}
		if err := r.p.idempotent(ctx, q).Exec(); err != nil {
			return cart.Cart{}, fmt.Errorf("%s: %w: %w", what, ErrOutcomeUnknown, err)
		}
		f, err := r.readState(ctx, owner, h.id, r.p.levels().Carts)
		if err != nil {
			return cart.Cart{}, fmt.Errorf("%s: %w: %w", what, ErrOutcomeUnknown, err)
		}
		switch {
		case !f.header:
			r.forget(owner) // no such cart (a stale or foreign id): the write is in nothing
			continue
		case !f.held() && f.active == h.id && f.live(now):
			r.remember(f)
			return f.c, nil
		case !f.held():
			r.forget(owner) // ended or replaced without a freeze: redo in the owner's cart now
			continue
		}
		if f, err = r.awaitSnapshot(ctx, f); err != nil {
			return cart.Cart{}, fmt.Errorf("%s: %w: %w", what, ErrOutcomeUnknown, err)
		}
		if holds(f.snapshot, w.ProductID, w.Written) {
			return f.c, nil // the freeze's read holds it: in the order, or in the merge
		}
		if f.active == h.id && f.mergingIn() {
			// A login's merge: not refused, redone in the generation the merge switches to.
			if f, err = r.awaitSwitch(ctx, f, now); err != nil {
				return cart.Cart{}, fmt.Errorf("%s: %w: %w", what, ErrOutcomeUnknown, err)
			}
		}
		if f.active != h.id {
			r.forget(owner) // given back, merged or ordered: the write is dead, redo it
			continue
		}
		if f.mergeInto != "" {
			return cart.Cart{}, cart.ErrGuestMerged
		}
		return cart.Cart{}, f.c.Editable(now) // frozen by a checkout: refused, and in nothing
	}
	return cart.Cart{}, &casError{what: what, attempts: maxEditRounds}
}

// editable reads the owner's cart for an edit that has no remembered generation to write
// into, and refuses the edit at once if a freeze holds it: nothing is written then. A put
// with no cart to write into creates one holding its line (createWith): created, it is done.
func (r *carts) editable(ctx context.Context, owner cart.Owner, line snapLine, expiresAt, now time.Time) (cartState, bool, error) {
	for {
		var st cartState
		var created bool
		var err error
		if line.Quantity > 0 {
			line.Written = nextLineTS()
			st, created, err = r.createWith(ctx, owner, expiresAt, now, r.p.levels().Carts, []snapLine{line}, nil, nil)
		} else {
			st, err = r.loadActive(ctx, owner, r.p.levels().Carts, now)
			if err == nil && !st.live(now) {
				err = cart.ErrNotFound
			}
		}
		if err != nil || created || !st.held() {
			return st, created, err
		}
		if !st.mergingIn() {
			return st, false, r.refuse(ctx, st, now)
		}
		if _, err := r.awaitSwitch(ctx, st, now); err != nil {
			return st, false, err
		}
	}
}

// refuse is the error a change that found st held answers: st.c.Editable's. A freeze's
// snapshot is published first: until then an edit that writes may still enter it, so a
// refusal answered earlier would precede an edit the order holds.
func (r *carts) refuse(ctx context.Context, st cartState, now time.Time) error {
	if st.held() && !st.published {
		if _, err := r.awaitSnapshot(ctx, st); err != nil {
			return err
		}
	}
	return st.c.Editable(now)
}

// settled is loadActive for a reader of the cart's lines: a freeze that holds the cart has
// published its snapshot (awaitSnapshot), and a login merging into it has switched it.
func (r *carts) settled(ctx context.Context, owner cart.Owner, now time.Time) (cartState, error) {
	for {
		st, err := r.loadActive(ctx, owner, r.p.levels().Carts, now)
		if err != nil || !st.hasActive() || !st.held() {
			return st, err
		}
		if st.mergingIn() {
			if _, err := r.awaitSwitch(ctx, st, now); err != nil {
				return st, err
			}
			continue
		}
		if st, err = r.awaitSnapshot(ctx, st); err != nil || st.active == st.physical() {
			return st, err
		}
		// Given back, ordered or reopened while this waited: read the cart as it is now.
	}
}

// awaitSnapshot returns held generation st once its snapshot is published: by its freezer
// within snapshotWait, else by this call.
func (r *carts) awaitSnapshot(ctx context.Context, st cartState) (cartState, error) {
	deadline := time.Now().Add(snapshotWait)
	backoff := 5 * time.Millisecond
	id := st.physical()
	for !st.published {
		if time.Now().After(deadline) {
			return r.publish(ctx, st)
		}
		if err := pause(ctx, &backoff); err != nil {
			return st, err
		}
		next, err := r.readState(ctx, st.owner, id, r.p.levels().Carts)
		if err != nil {
			return st, err
		}
		st = next
	}
	return st, nil
}

// awaitSwitch waits until the generation st read (held by a login's merge) is no longer the
// active one, and returns the generation's state then. A merge whose lease ran out at now (its
// login crashed and was not retried) is undone: the user's cart is given back as its
// snapshot holds it, merged_from unchanged, so a later retry of that login still merges once.
func (r *carts) awaitSwitch(ctx context.Context, st cartState, now time.Time) (cartState, error) {
	deadline := time.Now().Add(mergeWait)
	backoff := 5 * time.Millisecond
	id := st.physical()
	for st.active == id && st.mergingIn() {
		if !now.Before(st.c.CheckoutUntil) {
			if !st.published {
				var err error
				if st, err = r.publish(ctx, st); err != nil {
					return st, err
				}
			}
			if _, err := r.switchTo(ctx, st, st.snapshot, false, superseded, nil, now); err != nil && !errors.Is(err, errSwitchLost) {
				return st, err
			}
		} else if time.Now().After(deadline) {
			return st, fmt.Errorf("%s cart %s: a login's merge still holds it after %v", st.owner.Key(), st.c.ID, mergeWait)
		} else if err := pause(ctx, &backoff); err != nil {
			return st, err
		}
		next, err := r.readState(ctx, st.owner, id, r.p.levels().Carts)
		if err != nil {
			return st, err
		}
		st = next
	}
	return st, nil
}
