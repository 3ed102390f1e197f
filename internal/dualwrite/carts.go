package dualwrite

import (
	"context"
	"slices"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
)

type dualWriteCarts struct{ pair[cart.Repository] }

// cartRestorer is an old store that takes carts back (the rollback path).
type cartRestorer interface {
	RestoreCarts(ctx context.Context, owner cart.Owner, cs []cart.Cart, active string) error
}

// mirror copies owner's carts ids (and its active cart) into Cassandra while mirroring; after
// cutover it copies the owner's carts from Cassandra back to the old store, whole (the cart
// ids Cassandra mints are not known to the old store, so every cart of the owner goes).
//
// It runs whatever the operation answered: an error may hide a change the store made (a
// timeout, a client that hung up), and both copies read what is there. It runs under the
// phase, for the reason dualWriteSessions.after gives.
func (d *dualWriteCarts) mirror(ctx context.Context, p migrate.Phase, owner cart.Owner, ids ...string) {
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == "" })
	switch {
	case p.Mirrors():
		_ = d.copy(ctx, family.Carts, owner.Key(), func(ctx context.Context) error { return d.m.mirror.Carts(ctx, owner, ids...) })
	case p == migrate.Cutover:
		rs, ok := d.old.(cartRestorer)
		if !ok {
			return
		}
		_ = d.copy(ctx, family.Carts, owner.Key(), func(ctx context.Context) error {
			cs, active, err := d.m.target.OwnerCarts(ctx, owner)
			if err != nil {
				return err
			}
			return rs.RestoreCarts(ctx, owner, cs, active)
		})
	}
}

func (d *dualWriteCarts) ActiveCart(ctx context.Context, owner cart.Owner, now time.Time) (cart.Cart, error) {
	r, _, done := d.pick()
	defer done()
	return r.ActiveCart(ctx, owner, now)
}

func (d *dualWriteCarts) PutItem(ctx context.Context, owner cart.Owner, item cart.Item, expiresAt, now time.Time) (cart.Cart, error) {
	r, p, done := d.pick()
	defer done()
	c, err := r.PutItem(ctx, owner, item, expiresAt, now)
	d.mirror(ctx, p, owner, c.ID)
	return c, err
}

func (d *dualWriteCarts) RemoveItem(ctx context.Context, owner cart.Owner, productID string, now time.Time) (cart.Cart, error) {
	r, p, done := d.pick()
	defer done()
	c, err := r.RemoveItem(ctx, owner, productID, now)
	d.mirror(ctx, p, owner, c.ID)
	return c, err
}

func (d *dualWriteCarts) Merge(ctx context.Context, sessionID, userID string, now time.Time) (cart.MergeResult, error) {
	r, p, done := d.pick()
	defer done()
	guest := cart.Guest(sessionID)
	var guestID string
	if p.Mirrors() {
		// The guest cart the merge abandons: it is not the active one afterwards.
		if g, err := r.ActiveCart(ctx, guest, now); err == nil {
			guestID = g.ID
		}
	}
	res, err := r.Merge(ctx, sessionID, userID, now)
	d.mirror(ctx, p, guest, guestID)
	d.mirror(ctx, p, cart.User(userID), res.Cart.ID)
	return res, err
}

func (d *dualWriteCarts) BeginCheckout(ctx context.Context, owner cart.Owner, orderID string, until, now time.Time) (cart.Cart, error) {
	r, p, done := d.pick()
	defer done()
	c, err := r.BeginCheckout(ctx, owner, orderID, until, now)
	d.mirror(ctx, p, owner, c.ID)
	return c, err
}

func (d *dualWriteCarts) EndCheckout(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error {
	r, p, done := d.pick()
	defer done()
	err := r.EndCheckout(ctx, owner, cartID, orderID, now)
	d.mirror(ctx, p, owner, cartID)
	return err
}

func (d *dualWriteCarts) Reopen(ctx context.Context, owner cart.Owner, cartID string, now time.Time) (cart.Cart, error) {
	r, p, done := d.pick()
	defer done()
	c, err := r.Reopen(ctx, owner, cartID, now)
	d.mirror(ctx, p, owner, cartID, c.ID)
	return c, err
}

func (d *dualWriteCarts) MarkOrdered(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error {
	r, p, done := d.pick()
	defer done()
	err := r.MarkOrdered(ctx, owner, cartID, orderID, now)
	d.mirror(ctx, p, owner, cartID)
	return err
}

// PurgeExpired purges where the family is served; Cassandra's TTLs drop expired copies.
func (d *dualWriteCarts) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	r, _, done := d.pick()
	defer done()
	return r.PurgeExpired(ctx, now)
}
