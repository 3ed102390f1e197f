package cassandrastore

import (
	"context"
	"errors"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cart"
)

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// heldArgs bind heldIf for the freeze holding st: the status it froze the cart in ('active'
// for a checkout, 'merging' for a login's of a guest cart), its order or merge token, its user.
func heldArgs(st cartState) []any {
	status := cart.Active
	if st.mergeInto != "" {
		status = merging
	}
	return []any{string(status), nilIfEmpty(st.c.CheckoutOrder), nilIfEmpty(st.mergeInto)}
}

// publish publishes the snapshot of held generation st, once: a QUORUM read of its lines,
// begun after the freeze was on a quorum (its freezer's LWT returned, or a QUORUM read with
// blocking read repair showed it), so it holds every write whose fence read did not see the
// freeze; `IF ... AND snapshot_at = null` lets exactly one read become the snapshot. Returns
// st with the published snapshot, whoever published it.
func (r *carts) publish(ctx context.Context, st cartState) (cartState, error) {
	t, key := tableFor(st.owner)
	id := st.physical()
	cond := heldArgs(st)
	return casLoop(ctx, r.p, fmt.Sprintf("publish the snapshot of %s cart %s", st.owner.Key(), st.c.ID), func(ctx context.Context, a casAttempt) (cartState, *casOp[cartState], error) {
		now, err := r.readState(ctx, st.owner, id, a.cl)
		if err != nil {
			return st, nil, err
		}
		if now.published {
			return now, nil, nil
		}
		if !now.held() || now.c.CheckoutOrder != st.c.CheckoutOrder || now.mergeInto != st.mergeInto {
			return now, nil, fmt.Errorf("%s cart %s: its freeze ended with no snapshot published", st.owner.Key(), st.c.ID)
		}
		if a.n > 0 && a.cl != r.p.levels().Carts {
			// A SERIAL read completes Paxos state but is not the QUORUM read a snapshot needs
			// to be: read the lines again.
			if now, err = r.readState(ctx, st.owner, id, r.p.levels().Carts); err != nil {
				return st, nil, err
			}
		}
		lines := now.lines
		if lines == nil {
			lines = []snapLine{}
		}
		at := time.Now().UTC().Truncate(time.Millisecond)
		args := append([]any{ttlUntil(now.c.ExpiresAt, time.Now()), lines, at, key, id}, cond...)
		return now, &casOp[cartState]{query: r.query(ctx, t.stmts.publish, args...), applied: func() cartState {
			now.snapshot, now.published = lines, true
			now.c.Items = liveItems(lines)
			return now
		}}, nil
	})
}

// switchTo ends held generation st (status retired) and makes a fresh one holding lines the
// owner's active cart: the lines are written first, by plain writes into a physical cart no
// edit knows, then one LWT switches active_cart to it if the freeze still holds st. Its id is
// st's logical id, or with fresh set its own (a new cart). Lines keep their writetimes when
// they have one (a give-back), else get a new one.
func (r *carts) switchTo(ctx context.Context, st cartState, lines []snapLine, fresh bool, retired cart.Status, merged []string, now time.Time) (cart.Cart, error) {
	t, key := tableFor(st.owner)
	old := st.physical()
	id := newCartID(st, now)
	logical, err := gocql.ParseUUID(st.c.ID)
	if err != nil || fresh {
		logical = id
	}
	ttl := ttlUntil(st.c.ExpiresAt, time.Now())
	n := now.UTC().Truncate(time.Millisecond)
	lines = append([]snapLine(nil), lines...)
	for i := range lines {
		if lines[i].Written == 0 {
			lines[i].Written = nextLineTS()
		}
	}
	if err := r.writeLines(ctx, st.owner, id, ttl, lines); err != nil {
		return cart.Cart{}, err
	}
	items := liveItems(lines)
	seq := any(nil)
	if st.mergeSeq != nil {
		seq = *st.mergeSeq
	}
	if merged != nil {
		s := 1
		if st.mergeSeq != nil {
			s = *st.mergeSeq + 1
		}
		seq = s
	} else {
		for m := range st.merged {
			merged = append(merged, m)
		}
	}
	if fresh {
		merged, seq = nil, nil
	}
	created := st.c.CreatedAt
	if fresh || created.IsZero() {
		created = n
	}
	cond := heldArgs(st)
	result := func() cart.Cart {
		r.forget(st.owner) // the next read finds the new generation by the partition's head
		return cart.Cart{ID: logical.String(), Owner: st.owner, Status: cart.Active, Items: items,
			CreatedAt: created, UpdatedAt: n, ExpiresAt: st.c.ExpiresAt}
	}
	return casLoop(ctx, r.p, fmt.Sprintf("switch %s cart %s to a new generation", st.owner.Key(), st.c.ID), func(ctx context.Context, a casAttempt) (cart.Cart, *casOp[cart.Cart], error) {
		if a.n > 0 {
			again, err := r.readState(ctx, st.owner, old, a.cl)
			if err != nil {
				return cart.Cart{}, nil, err
			}
			if again.active == id {
				return result(), nil, nil // switched by an attempt whose answer was lost
			}
			if again.active != old || again.c.CheckoutOrder != st.c.CheckoutOrder || again.mergeInto != st.mergeInto || again.c.Status != st.c.Status {
				return cart.Cart{}, nil, errSwitchLost
			}
		}
		b := r.batch(ctx)
		b.Query(t.stmts.create, ttl, id, logical, ts(created), n, ts(st.c.ExpiresAt), merged, seq, key, id, old)
		b.Query(t.stmts.retire, append([]any{ttl, string(retired), n, key, old}, cond...)...)
		return cart.Cart{}, &casOp[cart.Cart]{batch: b, applied: result}, nil
	})
}

// errSwitchLost: the freeze a switch was to end no longer holds the cart (another caller ended it).
var errSwitchLost = errors.New("the cart's freeze was ended by another caller")

// superseded is the status of a generation a give-back or a merge replaced: the same cart
// lives on under the newer one.
const superseded cart.Status = "superseded"

func (r *carts) BeginCheckout(ctx context.Context, owner cart.Owner, orderID string, until, now time.Time) (cart.Cart, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	t, key := tableFor(owner)
	st, err := casLoop(ctx, r.p, fmt.Sprintf("freeze %s cart for order %s", owner.Key(), orderID), func(ctx context.Context, a casAttempt) (cartState, *casOp[cartState], error) {
		if h, ok := r.hint(owner); ok && a.n == 0 && unexpired(h.expires, now) {
			// The condition is the whole rule (the cart is the owner's active one, active,
			// and not frozen): the first round proposes on the remembered cart at once, and
			// publish reads it next. Refused, the next round reads and decides.
			st := cartState{owner: owner, active: h.id, newest: h.id, gen: h.id, header: true,
				c: cart.Cart{ID: h.id.String(), Owner: owner, Status: cart.Active, ExpiresAt: h.expires, CheckoutOrder: orderID}}
			q := r.query(ctx, t.stmts.freeze, ttlUntil(h.expires, time.Now()), orderID, ts(until), key, h.id, h.id)
			return st, &casOp[cartState]{query: q, applied: func() cartState { return st }}, nil
		}
		st, err := r.loadActive(ctx, owner, a.cl, now)
		for err == nil && st.mergingIn() {
			// A login's merge holds the cart for a moment: the checkout freezes what it leaves.
			if _, err = r.awaitSwitch(ctx, st, now); err == nil {
				st, err = r.loadActive(ctx, owner, a.cl, now)
			}
		}
		if err != nil {
			return st, nil, err
		}
		if !st.live(now) {
			return st, nil, cart.ErrNotFound
		}
		if st.c.CheckoutOrder == orderID {
			return st, nil, nil // frozen by an attempt whose outcome was unknown
		}
		if err := r.refuse(ctx, st, now); err != nil {
			return st, nil, err
		}
		q := r.query(ctx, t.stmts.freeze, ttlUntil(st.c.ExpiresAt, time.Now()), orderID, ts(until), key, st.active, st.active)
		return st, &casOp[cartState]{query: q, applied: func() cartState {
			st.c.CheckoutOrder, st.c.CheckoutUntil = orderID, until.UTC().Truncate(time.Millisecond)
			return st
		}}, nil
	})
	if err != nil {
		return cart.Cart{}, err
	}
	// The lines the order will hold: the snapshot, read after the freeze (by this call, or
	// by a reader that found it frozen and published first: then the order holds that one).
	if st, err = r.publish(ctx, st); err != nil {
		return cart.Cart{}, fmt.Errorf("freeze %s cart for order %s: %w", owner.Key(), orderID, err)
	}
	return st.c, nil
}

// heldBy reads the owner's active cart and reports whether it is cartID held by order.
func (r *carts) heldBy(ctx context.Context, owner cart.Owner, cartID, order string) (cartState, bool, error) {
	st, err := r.load(ctx, owner, r.p.levels().Carts)
	if err != nil || !st.hasActive() || st.c.ID != cartID || st.c.CheckoutOrder != order {
		return st, false, err
	}
	if !st.published {
		st, err = r.publish(ctx, st)
	}
	return st, err == nil, err
}

// EndCheckout gives the cart back: its snapshot's lines, under the same id, in a new
// generation (switchTo); edits refused during the freeze wrote into the old one only.
func (r *carts) EndCheckout(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	st, ok, err := r.heldBy(ctx, owner, cartID, orderID)
	if err != nil || !ok {
		return err
	}
	if _, err = r.switchTo(ctx, st, st.snapshot, false, superseded, nil, now); errors.Is(err, errSwitchLost) {
		return nil // not held by this checkout any more
	}
	return err
}

func (r *carts) Reopen(ctx context.Context, owner cart.Owner, cartID string, now time.Time) (cart.Cart, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	st, err := r.load(ctx, owner, r.p.levels().Serial)
	if err != nil {
		return cart.Cart{}, err
	}
	if !st.live(now) {
		return cart.Cart{}, cart.ErrNotFound
	}
	if st.c.ID != cartID || st.c.CheckoutOrder == "" {
		return st.c, nil // reopened (or ordered and replaced) already, or not frozen
	}
	if !st.published {
		if st, err = r.publish(ctx, st); err != nil {
			return cart.Cart{}, err
		}
	}
	c, err := r.switchTo(ctx, st, st.snapshot, true, cart.Abandoned, nil, now)
	if errors.Is(err, errSwitchLost) {
		return r.ActiveCart(ctx, owner, now)
	}
	return c, err
}

func (r *carts) MarkOrdered(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error {
	id, err := gocql.ParseUUID(cartID)
	if err != nil {
		return nil // not a cart id this backend issued: no cart of this owner has it
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	t, key := tableFor(owner)
	n := now.UTC().Truncate(time.Millisecond)
	r.forget(owner) // ended below, or by another process already
	_, err = casLoop(ctx, r.p, fmt.Sprintf("mark %s cart %s ordered", owner.Key(), cartID), func(ctx context.Context, a casAttempt) (struct{}, *casOp[struct{}], error) {
		if a.n == 0 && !owner.IsGuest() {
			// The condition is the whole invariant, and a user's cart never expires (no TTL
			// to read): the first round proposes at once (a cart not given back is stored
			// under its own id), saving the read before it on the checkout's path. Refused
			// (ordered already, another generation, or not the active cart), the next round
			// reads at SERIAL and decides.
			return struct{}{}, casDo(r.query(ctx, t.stmts.order, 0, orderID, n, key, id, id)), nil
		}
		st, err := r.load(ctx, owner, a.cl)
		if err != nil || !st.hasActive() || st.c.ID != cartID {
			return struct{}{}, nil, err // ordered already (a replay), or not this owner's active cart
		}
		q := r.query(ctx, t.stmts.order, ttlUntil(st.c.ExpiresAt, time.Now()), orderID, n, key, st.active, st.active)
		return struct{}{}, casDo(q), nil
	})
	return err
}
