package dualwrite

import (
	"context"
	"time"

	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/paging"
)

type dualWriteEvents struct{ pair[event.Repository] }

// AppendEvent appends to the store serving events, then copies: an event never changes, so
// the same record in both stores is the whole copy, made after the phase is released (a hung
// Cassandra holds up no phase change).
func (d *dualWriteEvents) AppendEvent(ctx context.Context, e event.Event) error {
	p, err, _ := d.writeThenCopy(ctx, family.Events, e.ID, func(ctx context.Context, r event.Repository) error { return r.AppendEvent(ctx, e) })
	if err != nil && p.Mirrors() {
		// The old store may have taken it all the same (a timeout, a client that hung up):
		// copy what it holds.
		_ = d.copy(ctx, family.Events, e.ID, func(ctx context.Context) error { return d.m.mirror.Keys(ctx, migrate.Events, e.ID) })
	}
	return err
}

func (d *dualWriteEvents) ListEvents(ctx context.Context, q event.Query) (paging.Page[event.Event], error) {
	r, _, done := d.pick()
	defer done()
	return r.ListEvents(ctx, q)
}

func (d *dualWriteEvents) PurgeEvents(ctx context.Context, before time.Time) (int, error) {
	r, _, done := d.pick()
	defer done()
	return r.PurgeEvents(ctx, before)
}
