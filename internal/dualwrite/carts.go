package dualwrite

import (
	"context"
	"slices"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
)

// cartRestorer is an old store that takes carts back (the rollback path).
type cartRestorer interface {
	RestoreCarts(ctx context.Context, owner cart.Owner, cs []cart.Cart, active string) error
}

// mirror, called by every cart write, copies owner's carts ids (and its active cart) into
// Cassandra while mirroring; after cutover it copies the owner's carts from Cassandra back to
// the old store, whole (the cart ids Cassandra mints are not known to the old store, so
// every cart of the owner goes).
//
// It runs whatever the operation answered: an error may hide a change the store made (a
// timeout, a client that hung up), and both copies read what is there. It runs under the
// phase, for the reason dualWriteSessions.after gives.
func (d *dualWriteCarts) mirror(ctx context.Context, p migrate.Phase, owner cart.Owner, ids ...string) {
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == "" })
	switch {
	case p.Mirrors():
		_ = d.copy(ctx, family.Carts, owner.Key(), func(ctx context.Context) error { return d.m.carts.Carts(ctx, owner, ids...) })
	case p == migrate.Cutover:
		rs, ok := d.old.(cartRestorer)
		if !ok {
			return
		}
		_ = d.copy(ctx, family.Carts, owner.Key(), func(ctx context.Context) error {
			cs, active, err := d.m.owners.OwnerCarts(ctx, owner)
			if err != nil {
				return err
			}
			return rs.RestoreCarts(ctx, owner, cs, active)
		})
	}
}

// Merge is written by hand: it mirrors two owners, the guest's cart the merge abandons
// (read before the merge, while it is still the guest's active cart) and the user's.
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
