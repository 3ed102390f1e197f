package dualwrite

import (
	"context"

	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/history"
)

// record writes the projector's entry to both stores (UpsertEntry): it is a whole state, and
// the projector applies one order's changes in order. A failed copy is returned, not only
// reported: the projector retries the message (both writes are idempotent), so no entry is
// left behind; while Cassandra is down that holds the projector back.
//
// The copy runs after the phase is released and bounded in time: both stores order an entry
// by its UpdatedAt, not by when it lands, so a late copy is harmless, while one held under
// the phase would let a hung Cassandra block every phase change, and with it every history
// read queued behind the change.
func (d *dualWriteHistory) record(ctx context.Context, orderID string, write func(context.Context, history.Repository) error) error {
	_, err, copyErr := d.writeThenCopy(ctx, family.History, orderID, write)
	if err != nil {
		return err
	}
	return copyErr
}
