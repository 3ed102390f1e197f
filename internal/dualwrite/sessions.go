package dualwrite

import (
	"context"

	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/session"
)

// after, called by every generated session write, copies id into Cassandra while mirroring, whatever the old store answered: an error
// may hide a change it made (a timeout, a client that hung up), and the copy reads what is
// there. After cutover it replays op on the old store when Cassandra took the change. It runs
// under the phase (the caller's pick): a mirror is stamped with the time it reads, so one
// landing after this process applied a cutover could overwrite a newer write in Cassandra.
func (d *dualWriteSessions) after(ctx context.Context, p migrate.Phase, id string, err error, op func(context.Context, session.Repository) error) {
	switch {
	case p.Mirrors():
		_ = d.copy(ctx, family.Sessions, id, func(ctx context.Context) error { return d.m.mirror.Keys(ctx, migrate.Sessions, id) })
	case p == migrate.Cutover && err == nil:
		_ = d.copy(ctx, family.Sessions, id, func(ctx context.Context) error { return op(ctx, d.old) })
	}
}
