package placement

import (
	"context"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
)

// The dual-write layer: how a shop process takes part in `shardmart migrate`. A process
// started with Options.Migrations wraps every family that lives in an old store (the
// embedded store or MongoDB) and that Cassandra can hold (dualwrite_<family>.go), and
// applies the family's phase from the keyspace's migration_state (dualwrite_watch.go):
//
//   - no phase: the old store only;
//   - dual_write, copied, verified: the old store stays the source of truth; after each write
//     the change is copied into Cassandra (sessions and carts by reading the changed keys
//     back, migrate.Mirror; events and history by writing the same record; the catalog by the
//     projector's sink). A failed copy never fails the request, which the old store already
//     committed: it is reported (Options.MigrationError) and verify finds the key;
//   - cutover: reads and writes go to Cassandra; sessions, events and history are also written
//     to the old store, best effort, so a rollback finds them there (carts are not: see
//     docs/migration.md).
//
// Every copy runs in a context of its own, bounded by copyTimeout (copy).

// dualWrite is what the wrappers share.
type dualWrite struct {
	phases  map[Family]*familyPhase
	mirror  *migrate.Mirror
	target  *migrate.Target
	onError func(f Family, key string, err error)
}

// copyTimeout bounds one copy of a change to the other store.
const copyTimeout = 30 * time.Second

// with is m copying through mirror (one per old backend).
func (m *dualWrite) with(mirror *migrate.Mirror) *dualWrite {
	c := *m
	c.mirror = mirror
	return &c
}

// pair is one family's repository in the old store and in Cassandra, and its phase.
type pair[R any] struct {
	old, neu R
	m        *dualWrite
	ph       *familyPhase
}

// pick begins an operation: the store serving the family (the source of truth), the phase,
// and the func that ends the operation.
func (d *pair[R]) pick() (R, migrate.Phase, func()) {
	p, done := d.ph.begin()
	if p == migrate.Cutover {
		return d.neu, p, done
	}
	return d.old, p, done
}

// other is the store that gets the copy while the family migrates or is cut over.
func (d *pair[R]) other(p migrate.Phase) R {
	if p == migrate.Cutover {
		return d.old
	}
	return d.neu
}

// copy makes one copy of a committed change of key and reports its failure. It runs in a
// context of its own: not the request's, whose client may hang up once the store has
// committed (the copy must still be made), but bounded by copyTimeout.
func (d *pair[R]) copy(ctx context.Context, f Family, key string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), copyTimeout)
	defer cancel()
	err := fn(ctx)
	if err != nil && d.m.onError != nil {
		d.m.onError(f, key, err)
	}
	return err
}

// writeThenCopy writes with the store serving the family, releases the phase, then, if the
// write succeeded while the family migrates or is cut over, makes the same write to the other
// store. For records written whole and ordered by their own time, not by when they land, so a
// late copy is harmless, while one held under the phase would let a hung Cassandra block every
// phase change. It returns the phase, the write's error and the copy's.
func (d *pair[R]) writeThenCopy(ctx context.Context, f Family, key string, write func(context.Context, R) error) (p migrate.Phase, err, copyErr error) {
	r, p, done := d.pick()
	err = write(ctx, r)
	done()
	if err == nil && p != migrate.PhaseNone {
		copyErr = d.copy(ctx, f, key, func(ctx context.Context) error { return write(ctx, d.other(p)) })
	}
	return p, err, copyErr
}

// migratable are the families `shardmart migrate` can move to Cassandra.
var migratable = family.ToCassandra()

// openDualWrite wraps the families cfg keeps in an old store with the dual-write layer,
// opening Cassandra if the placement did not, and applies the current state once.
func (s *Stores) openDualWrite(ctx context.Context, cfg Config, o Options, opened map[string]backend) error {
	cb, ok := opened[Cassandra].(cassandraBackend)
	if !ok {
		b, err := openCassandra(ctx, o)
		if err != nil {
			return fmt.Errorf("dual writes: open cassandra: %w", err)
		}
		opened[Cassandra] = b
		s.closers = append(s.closers, b.Close)
		s.pings = append(s.pings, namedPing{backend: Cassandra, ping: b.Ping})
		cb = b.(cassandraBackend)
	}
	target := migrate.NewTarget(cb.st.Session())
	target.Retention = o.EventRetention
	target.Levels = cb.st.Levels()
	m := &dualWrite{phases: map[Family]*familyPhase{}, target: target, onError: o.MigrationError}
	mirrors := map[string]*migrate.Mirror{}
	mirrorFor := func(backend string) (*migrate.Mirror, error) {
		if mr, ok := mirrors[backend]; ok {
			return mr, nil
		}
		env, err := migrate.Open(ctx, migrate.Stores{From: backend, SQLitePath: o.SQLitePath, MongoURI: o.MongoURI,
			MongoDatabase: o.MongoDatabase, Session: cb.st.Session(), EventRetention: o.EventRetention})
		if err != nil {
			return nil, fmt.Errorf("dual writes: open the %s store to copy from: %w", backend, err)
		}
		s.closers = append(s.closers, func() error { env.Close(); return nil })
		mr := &migrate.Mirror{Src: env.Src, Dst: m.target}
		mirrors[backend] = mr
		return mr, nil
	}
	for _, f := range migratable {
		if cfg[f] == Cassandra {
			continue
		}
		ph := &familyPhase{}
		m.phases[f] = ph
		fm := m
		if f == Sessions || f == Carts || f == Events {
			// These copy by reading keys back from the old store.
			mr, err := mirrorFor(cfg[f])
			if err != nil {
				return err
			}
			fm = m.with(mr)
		}
		slots[f].wrap(s, cb, fm, ph)
	}
	s.dualWrite = m
	// Apply the state before serving anything: a family cut over must never be served from
	// the old store, even for the first request after a restart.
	states, err := m.target.States(ctx)
	if err != nil {
		return fmt.Errorf("dual writes: %w", err)
	}
	for f, ph := range m.phases {
		ph.set(states[f].Phase)
	}
	return nil
}
