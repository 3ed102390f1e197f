package dualwrite

import (
	"context"
	"time"

	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/session"
)

type dualWriteSessions struct{ pair[session.Repository] }

// after copies id into Cassandra while mirroring, whatever the old store answered: an error
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

func (d *dualWriteSessions) CreateSession(ctx context.Context, s session.Session) error {
	r, p, done := d.pick()
	defer done()
	err := r.CreateSession(ctx, s)
	d.after(ctx, p, s.ID, err, func(ctx context.Context, o session.Repository) error { return o.CreateSession(ctx, s) })
	return err
}

func (d *dualWriteSessions) GetSession(ctx context.Context, id string, now time.Time) (session.Session, error) {
	r, _, done := d.pick()
	defer done()
	return r.GetSession(ctx, id, now)
}

func (d *dualWriteSessions) BindUser(ctx context.Context, id, userID string, now time.Time) (session.Session, error) {
	r, p, done := d.pick()
	defer done()
	s, err := r.BindUser(ctx, id, userID, now)
	d.after(ctx, p, id, err, func(ctx context.Context, o session.Repository) error {
		_, err := o.BindUser(ctx, id, userID, now)
		return err
	})
	return s, err
}

func (d *dualWriteSessions) Touch(ctx context.Context, id string, now time.Time) error {
	r, p, done := d.pick()
	defer done()
	err := r.Touch(ctx, id, now)
	d.after(ctx, p, id, err, func(ctx context.Context, o session.Repository) error { return o.Touch(ctx, id, now) })
	return err
}

func (d *dualWriteSessions) Revoke(ctx context.Context, id string) error {
	r, p, done := d.pick()
	defer done()
	err := r.Revoke(ctx, id)
	d.after(ctx, p, id, err, func(ctx context.Context, o session.Repository) error { return o.Revoke(ctx, id) })
	return err
}

// PurgeExpired purges where the family is served; Cassandra's TTLs drop expired copies.
func (d *dualWriteSessions) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	r, _, done := d.pick()
	defer done()
	return r.PurgeExpired(ctx, now)
}
