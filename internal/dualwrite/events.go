package dualwrite

import (
	"context"

	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
)

// record appends to the store serving events, then copies (AppendEvent): an event never
// changes, so the same record in both stores is the whole copy, made after the phase is
// released (a hung Cassandra holds up no phase change).
func (d *dualWriteEvents) record(ctx context.Context, id string, write func(context.Context, event.Repository) error) error {
	p, err, _ := d.writeThenCopy(ctx, family.Events, id, write)
	if err != nil && p.Mirrors() {
		// The old store may have taken it all the same (a timeout, a client that hung up):
		// copy what it holds.
		_ = d.copy(ctx, family.Events, id, func(ctx context.Context) error { return d.m.mirror.Keys(ctx, migrate.Events, id) })
	}
	return err
}
