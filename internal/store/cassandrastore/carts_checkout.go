package cassandrastore

import (
	"context"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cart"
)

func (r *carts) BeginCheckout(ctx context.Context, owner cart.Owner, orderID string, until, now time.Time) (cart.Cart, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	t, key := tableFor(owner)
	_, err := casLoop(ctx, r.p, fmt.Sprintf("freeze %s cart for order %s", owner.Key(), orderID), func(ctx context.Context, a casAttempt) (struct{}, *casOp[struct{}], error) {
		st, err := r.loadActive(ctx, owner, a.cl, now)
		if err != nil {
			return struct{}{}, nil, err
		}
		if !st.live(now) {
			return struct{}{}, nil, cart.ErrNotFound
		}
		if st.c.CheckoutOrder == orderID {
			return struct{}{}, nil, nil // frozen by an attempt whose outcome was unknown
		}
		if err := st.c.Editable(now); err != nil {
			return struct{}{}, nil, err
		}
		q := r.query(ctx, t.stmts.freeze, ttlUntil(st.c.ExpiresAt, time.Now()), orderID, ts(until), key, st.active, st.active)
		return struct{}{}, casDo(q), nil
	})
	if err != nil {
		return cart.Cart{}, err
	}
	// The lines the order will hold: read at SERIAL after the freeze, they include every edit
	// applied before it, and no edit can apply after it.
	st, err := r.loadActive(ctx, owner, r.p.levels().Serial, now)
	if err != nil {
		return cart.Cart{}, err
	}
	if !st.hasActive() || st.c.CheckoutOrder != orderID {
		return cart.Cart{}, fmt.Errorf("freeze %s cart for order %s: ended right after the freeze", owner.Key(), orderID)
	}
	return st.c, nil
}

func (r *carts) EndCheckout(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error {
	id, err := gocql.ParseUUID(cartID)
	if err != nil {
		return nil // not a cart id this backend issued
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	t, key := tableFor(owner)
	_, err = casLoop(ctx, r.p, fmt.Sprintf("release %s cart %s from order %s", owner.Key(), cartID, orderID), func(ctx context.Context, a casAttempt) (struct{}, *casOp[struct{}], error) {
		if a.refused {
			return struct{}{}, nil, nil // not held by this checkout
		}
		if a.n > 0 { // the last attempt's outcome is unknown
			st, err := r.load(ctx, owner, r.p.levels().Serial)
			if err != nil || st.active != id || st.c.CheckoutOrder != orderID {
				return struct{}{}, nil, err
			}
		}
		q := r.query(ctx, t.stmts.release, key, id, id, orderID)
		return struct{}{}, casDo(q), nil
	})
	return err
}

func (r *carts) Reopen(ctx context.Context, owner cart.Owner, cartID string, now time.Time) (cart.Cart, error) {
	old, err := gocql.ParseUUID(cartID)
	if err != nil {
		return r.ActiveCart(ctx, owner, now) // not a cart id this backend issued
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	t, key := tableFor(owner)
	n := now.UTC().Truncate(time.Millisecond)
	return casLoop(ctx, r.p, fmt.Sprintf("reopen %s cart %s", owner.Key(), cartID), func(ctx context.Context, a casAttempt) (cart.Cart, *casOp[cart.Cart], error) {
		// SERIAL: the lines copied are the ones the freeze fixed.
		st, err := r.load(ctx, owner, r.p.levels().Serial)
		if err != nil {
			return cart.Cart{}, nil, err
		}
		if !st.live(now) {
			return cart.Cart{}, nil, cart.ErrNotFound
		}
		if st.active != old {
			return st.c, nil, nil // reopened (or ordered and replaced) already
		}
		id := newCartID(st, now)
		ttl := ttlUntil(st.c.ExpiresAt, time.Now())
		var seenOrder any
		if st.c.CheckoutOrder != "" {
			seenOrder = st.c.CheckoutOrder
		}
		b := r.batch(ctx)
		b.Query(t.stmts.create, ttl, id, n, n, ts(st.c.ExpiresAt), key, id, old)
		b.Query(t.stmts.retire, ttl, n, key, old, seenOrder)
		for _, it := range st.c.Items {
			b.Query(t.stmts.putNew, ttl, it.Category, it.Quantity, ts(it.AddedAt), key, id, it.ProductID)
		}
		return cart.Cart{}, &casOp[cart.Cart]{batch: b, applied: func() cart.Cart {
			r.forget(owner) // the next read finds the copy by the partition's head
			return cart.Cart{ID: id.String(), Owner: owner, Status: cart.Active, Items: st.c.Items,
				CreatedAt: n, UpdatedAt: n, ExpiresAt: st.c.ExpiresAt}
		}}, nil
	})
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
			// to read): the first round proposes at once, saving the read before it on the
			// checkout's path. Refused (ordered already, or not the active cart), the next
			// round reads at SERIAL and finds nothing left to do.
			return struct{}{}, casDo(r.query(ctx, t.stmts.order, 0, orderID, n, key, id, id)), nil
		}
		st, err := r.load(ctx, owner, a.cl)
		if err != nil || st.active != id {
			return struct{}{}, nil, err // ordered already (a replay), or not this owner's active cart
		}
		q := r.query(ctx, t.stmts.order, ttlUntil(st.c.ExpiresAt, time.Now()), orderID, n, key, id, id)
		return struct{}{}, casDo(q), nil
	})
	return err
}
