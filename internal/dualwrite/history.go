package dualwrite

import (
	"context"

	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/paging"
)

type dualWriteHistory struct{ pair[history.Repository] }

// UpsertEntry writes the projector's entry to both stores: it is a whole state, and the
// projector applies one order's changes in order. A failed copy is returned, not only
// reported: the projector retries the message (both writes are idempotent), so no entry is
// left behind; while Cassandra is down that holds the projector back.
//
// The copy runs after the phase is released and bounded in time: both stores order an entry
// by its UpdatedAt, not by when it lands, so a late copy is harmless, while one held under
// the phase would let a hung Cassandra block every phase change, and with it every history
// read queued behind the change.
func (d *dualWriteHistory) UpsertEntry(ctx context.Context, e history.Entry) error {
	_, err, copyErr := d.writeThenCopy(ctx, family.History, e.OrderID, func(ctx context.Context, r history.Repository) error { return r.UpsertEntry(ctx, e) })
	if err != nil {
		return err
	}
	return copyErr
}

func (d *dualWriteHistory) ListHistory(ctx context.Context, userID string, page paging.Request) (paging.Page[history.Entry], error) {
	r, _, done := d.pick()
	defer done()
	return r.ListHistory(ctx, userID, page)
}
