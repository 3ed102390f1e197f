// Package dualwrite is how a shop process takes part in `shardmart migrate`. A process
// started with migrations on (placement.Options.Migrations: shop.Open wraps its stores with
// Wrap) wraps every family that lives in an old store (the embedded store or MongoDB) and
// that Cassandra can hold (<family>.go), and applies the family's phase from the keyspace's
// migration_state (watch.go):
//
//   - no phase: the old store only;
//   - dual_write, copied, verified: the old store stays the source of truth; after each write
//     the change is copied into Cassandra (sessions and carts by reading the changed keys
//     back, migrate.Mirror; events and history by writing the same record; the catalog by the
//     projector's sink). A failed copy never fails the request, which the old store already
//     committed: it is reported (placement.Options.MigrationError) and verify finds the key;
//   - cutover: reads and writes go to Cassandra; sessions, events and history are also written
//     to the old store, best effort, so a rollback finds them there (carts are not: see
//     docs/migration.md).
//
// Every copy runs in a context of its own, bounded by copyTimeout (copy).
//
// The wrappers' methods are generated (wrap_gen.go, by wrapgen) from the repository
// interfaces, each method's treatment read from its //dualwrite: directive, and so is each
// family's wiring (newStores, repoWrapper, readsKeysBack) from its wrapgen entry; the
// families' files hold the hooks the generated writes call, and the few methods written by
// hand.
package dualwrite

//go:generate go run ./wrapgen -o wrap_gen.go

import (
	"context"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// Layer is what the wrappers share: the phase each family is in, as this process applies it.
type Layer struct {
	phases map[family.Name]*familyPhase
	// mirror copies changed keys into the new store, carts an owner's carts.
	mirror keyMirror
	carts  cartMirror
	// state is where the migration state and the heartbeats live (Cassandra or MongoDB);
	// owners reads an owner's carts back from the new store (the rollback path).
	state   stateSource
	owners  ownerCarts
	onError func(f family.Name, key string, err error)
}

// cartMirror copies an owner's carts as the old store holds them now into the new store.
type cartMirror interface {
	Carts(ctx context.Context, owner cart.Owner, ids ...string) error
}

// ownerCarts reads owner's carts from the new store, and the active one's id.
type ownerCarts interface {
	OwnerCarts(ctx context.Context, owner cart.Owner) ([]cart.Cart, string, error)
}

// keyMirror copies keys of a family as the old store holds them now into the new store
// (migrate.Mirror, migrate.MongoMirror).
type keyMirror interface {
	Keys(ctx context.Context, f family.Name, keys ...string) error
}

// stateSource is where this process reads the phases and reports the ones it applies.
type stateSource interface {
	States(ctx context.Context) (map[family.Name]migrate.State, error)
	Heartbeat(ctx context.Context, f family.Name, writer string, p migrate.Phase) error
}

// copyTimeout bounds one copy of a change to the other store.
const copyTimeout = 30 * time.Second

// with is m copying through mirror (one per old backend).
func (m *Layer) with(mirror *migrate.Mirror) *Layer {
	c := *m
	c.mirror, c.carts = mirror, mirror
	return &c
}

// pair is one family's repository in the old store and in Cassandra, and its phase.
type pair[R any] struct {
	old, neu R
	m        *Layer
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
func (d *pair[R]) copy(ctx context.Context, f family.Name, key string, fn func(ctx context.Context) error) error {
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
func (d *pair[R]) writeThenCopy(ctx context.Context, f family.Name, key string, write func(context.Context, R) error) (p migrate.Phase, err, copyErr error) {
	r, p, done := d.pick()
	err = write(ctx, r)
	done()
	if err == nil && p != migrate.PhaseNone {
		copyErr = d.copy(ctx, f, key, func(ctx context.Context) error { return write(ctx, d.other(p)) })
	}
	return p, err, copyErr
}

// Wrap wraps the families cfg keeps in an old store with the dual-write layer, opening
// Cassandra if the placement did not, and applies the current state once. placement.Open calls
// it (Options.Wrap) before it decorates the stores, so every call is observed once, under the
// family's placement.
func Wrap(ctx context.Context, s *placement.Stores, cfg placement.Config, o placement.Options) (*Layer, error) {
	cst, err := s.CassandraStore(ctx)
	if err != nil {
		return nil, fmt.Errorf("dual writes: open cassandra: %w", err)
	}
	target := migrate.NewTarget(cst.Session())
	target.Retention = o.EventRetention
	target.Levels = cst.Levels()
	m := &Layer{phases: map[family.Name]*familyPhase{}, state: target, owners: target, onError: o.MigrationError}
	mirrors := map[string]*migrate.Mirror{}
	mirrorFor := func(backend string) (*migrate.Mirror, error) {
		if mr, ok := mirrors[backend]; ok {
			return mr, nil
		}
		env, err := migrate.Open(ctx, migrate.Stores{From: backend, SQLitePath: o.SQLitePath, MongoURI: o.MongoURI,
			MongoDatabase: o.MongoDatabase, Session: cst.Session(), EventRetention: o.EventRetention})
		if err != nil {
			return nil, fmt.Errorf("dual writes: open the %s store to copy from: %w", backend, err)
		}
		s.OnClose(func() error { env.Close(); return nil })
		mr := &migrate.Mirror{Src: env.Src, Dst: target}
		mirrors[backend] = mr
		return mr, nil
	}
	for _, f := range family.ToCassandra() {
		if cfg[f] == family.Cassandra {
			continue
		}
		ph := &familyPhase{}
		m.phases[f] = ph
		fm := m
		if readsKeysBack[f] {
			mr, err := mirrorFor(cfg[f])
			if err != nil {
				return nil, err
			}
			fm = m.with(mr)
		}
		wrappers[f](s, cst, fm, ph)
	}
	if err := m.applyFirst(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// applyFirst applies the state before anything is served: a family cut over must never be
// served from the old store, even for the first request after a restart.
func (m *Layer) applyFirst(ctx context.Context) error {
	states, err := m.state.States(ctx)
	if err != nil {
		return fmt.Errorf("dual writes: %w", err)
	}
	for f, ph := range m.phases {
		ph.set(states[f].Phase)
	}
	return nil
}

// wrapFunc puts one family's repositories under the layer, their new side from neu.
type wrapFunc[S any] func(s *placement.Stores, neu S, m *Layer, ph *familyPhase)

// wrappers put each family's repositories under the layer, one per family that moves to
// Cassandra (a test holds them equal to internal/family's list): the generated repoWrapper,
// and the catalog's by hand, since it also sets the sink.
var wrappers = wrappersFor(family.ToCassandra(), map[family.Name]wrapFunc[*cassandrastore.Store]{
	family.Catalog: func(s *placement.Stores, cst *cassandrastore.Store, _ *Layer, ph *familyPhase) {
		s.Catalog = &dualWriteCatalog{pair[catalog.Reader]{old: s.Catalog, neu: cst.Catalog(), ph: ph}}
		s.CatalogSink = &catalogSink{neu: cst.Catalog(), ph: ph}
	},
})

// wrappersFor is the wrapper of each of fams: byHand's, else the generated one (none: the
// family is left out, which the tests of the maps catch).
func wrappersFor[S newStores](fams []family.Name, byHand map[family.Name]wrapFunc[S]) map[family.Name]wrapFunc[S] {
	out := map[family.Name]wrapFunc[S]{}
	for _, f := range fams {
		if w, ok := byHand[f]; ok {
			out[f] = w
		} else if w := repoWrapper[S](f); w != nil {
			out[f] = w
		}
	}
	return out
}
