package placement

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/projection"
	"github.com/shardmart/shardmart/internal/session"
)

// The migration layer (MIG-1). A shop process started with Options.Migrations wraps every
// family that lives in the old store (the embedded store or MongoDB) and that Cassandra can
// hold, and applies the family's phase from the keyspace's migration_state:
//
//   - no migration: the old store only;
//   - dual_write, copied, verified: the old store stays the source of truth; after each write
//     the change is copied into Cassandra (sessions and carts by reading the changed keys
//     back, migrate.Mirror; events and history by writing the same record; the catalog by the
//     projector's sink). A failed copy never fails the request, which the old store already
//     committed: it is reported (Options.MigrationError) and verify finds the key;
//   - cutover: reads and writes go to Cassandra; sessions, events and history are also written
//     to the old store, best effort, so a rollback finds them there (carts are not: see
//     docs/migration.md).
//
// WatchMigrations polls the state and reports the phase this process applies (heartbeats),
// which `migrate run` and `migrate cutover` wait on.

// familyPhase is the phase one family is in, as this process applies it. Every operation
// holds it shared for its whole run, and a phase change waits for the operations begun under
// the old phase: once this process reports a phase, no write decided under the previous one
// is still running (a write that skipped the mirror landing after the backfill read its key).
type familyPhase struct {
	mu sync.RWMutex
	p  migrate.Phase
}

// begin returns the phase and the func that ends the operation.
func (f *familyPhase) begin() (migrate.Phase, func()) {
	f.mu.RLock()
	return f.p, f.mu.RUnlock
}

func (f *familyPhase) get() migrate.Phase {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.p
}

func (f *familyPhase) set(p migrate.Phase) {
	if f.get() == p {
		return
	}
	f.mu.Lock()
	f.p = p
	f.mu.Unlock()
}

// migration is what the wrappers share.
type migration struct {
	phases  map[Family]*familyPhase
	mirror  *migrate.Mirror
	target  *migrate.Target
	onError func(f Family, key string, err error)
}

// copyTimeout bounds one copy of a change to the other store.
const copyTimeout = 30 * time.Second

// detach is the context a copy of a committed change runs in: not the request's, whose client
// may hang up once the old store has committed (the copy must still be made), but bounded.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), copyTimeout)
}

// with is m copying through mirror (one per old backend).
func (m *migration) with(mirror *migrate.Mirror) *migration {
	c := *m
	c.mirror = mirror
	return &c
}

func (m *migration) failed(f Family, key string, err error) {
	if err != nil && m.onError != nil {
		m.onError(f, key, err)
	}
}

// pair is one family's repository in the old store and in Cassandra, and its phase.
type pair[R any] struct {
	old, neu R
	m        *migration
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

// ---- sessions

type migratingSessions struct{ pair[session.Repository] }

// after copies id into Cassandra while mirroring, whatever the old store answered: an error
// may hide a change it made (a timeout, a client that hung up), and the copy reads what is
// there. After cutover it replays op on the old store when Cassandra took the change.
func (d *migratingSessions) after(ctx context.Context, p migrate.Phase, id string, err error, op func(context.Context, session.Repository) error) {
	ctx, cancel := detach(ctx)
	defer cancel()
	switch {
	case p.Mirrors():
		d.m.failed(Sessions, id, d.m.mirror.Keys(ctx, migrate.Sessions, id))
	case p == migrate.Cutover && err == nil:
		d.m.failed(Sessions, id, op(ctx, d.old))
	}
}

func (d *migratingSessions) CreateSession(ctx context.Context, s session.Session) error {
	r, p, done := d.pick()
	defer done()
	err := r.CreateSession(ctx, s)
	d.after(ctx, p, s.ID, err, func(ctx context.Context, o session.Repository) error { return o.CreateSession(ctx, s) })
	return err
}

func (d *migratingSessions) GetSession(ctx context.Context, id string, now time.Time) (session.Session, error) {
	r, _, done := d.pick()
	defer done()
	return r.GetSession(ctx, id, now)
}

func (d *migratingSessions) BindUser(ctx context.Context, id, userID string, now time.Time) (session.Session, error) {
	r, p, done := d.pick()
	defer done()
	s, err := r.BindUser(ctx, id, userID, now)
	d.after(ctx, p, id, err, func(ctx context.Context, o session.Repository) error {
		_, err := o.BindUser(ctx, id, userID, now)
		return err
	})
	return s, err
}

func (d *migratingSessions) Touch(ctx context.Context, id string, now time.Time) error {
	r, p, done := d.pick()
	defer done()
	err := r.Touch(ctx, id, now)
	d.after(ctx, p, id, err, func(ctx context.Context, o session.Repository) error { return o.Touch(ctx, id, now) })
	return err
}

func (d *migratingSessions) Revoke(ctx context.Context, id string) error {
	r, p, done := d.pick()
	defer done()
	err := r.Revoke(ctx, id)
	d.after(ctx, p, id, err, func(ctx context.Context, o session.Repository) error { return o.Revoke(ctx, id) })
	return err
}

// PurgeExpired purges where the family is served; Cassandra's TTLs drop expired copies.
func (d *migratingSessions) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	r, _, done := d.pick()
	defer done()
	return r.PurgeExpired(ctx, now)
}

// ---- carts

type migratingCarts struct{ pair[cart.Repository] }

// cartRestorer is an old store that takes carts back (the rollback path).
type cartRestorer interface {
	RestoreCarts(ctx context.Context, owner cart.Owner, cs []cart.Cart, active string) error
}

// mirror copies owner's carts ids (and its active cart) into Cassandra while mirroring; after
// cutover it copies the owner's carts from Cassandra back to the old store, whole (the cart
// ids Cassandra mints are not known to the old store, so every cart of the owner goes).
//
// It runs whatever the operation answered: an error may hide a change the store made (a
// timeout, a client that hung up), and both copies read what is there.
func (d *migratingCarts) mirror(ctx context.Context, p migrate.Phase, owner cart.Owner, ids ...string) {
	ctx, cancel := detach(ctx)
	defer cancel()
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == "" })
	switch {
	case p.Mirrors():
		d.m.failed(Carts, owner.Key(), d.m.mirror.Carts(ctx, owner, ids...))
	case p == migrate.Cutover:
		rs, ok := d.old.(cartRestorer)
		if !ok {
			return
		}
		cs, active, err := d.m.target.OwnerCarts(ctx, owner)
		if err == nil {
			err = rs.RestoreCarts(ctx, owner, cs, active)
		}
		d.m.failed(Carts, owner.Key(), err)
	}
}

func (d *migratingCarts) ActiveCart(ctx context.Context, owner cart.Owner, now time.Time) (cart.Cart, error) {
	r, _, done := d.pick()
	defer done()
	return r.ActiveCart(ctx, owner, now)
}

func (d *migratingCarts) PutItem(ctx context.Context, owner cart.Owner, item cart.Item, expiresAt, now time.Time) (cart.Cart, error) {
	r, p, done := d.pick()
	defer done()
	c, err := r.PutItem(ctx, owner, item, expiresAt, now)
	d.mirror(ctx, p, owner, c.ID)
	return c, err
}

func (d *migratingCarts) RemoveItem(ctx context.Context, owner cart.Owner, productID string, now time.Time) (cart.Cart, error) {
	r, p, done := d.pick()
	defer done()
	c, err := r.RemoveItem(ctx, owner, productID, now)
	d.mirror(ctx, p, owner, c.ID)
	return c, err
}

func (d *migratingCarts) Merge(ctx context.Context, sessionID, userID string, now time.Time) (cart.MergeResult, error) {
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

func (d *migratingCarts) BeginCheckout(ctx context.Context, owner cart.Owner, orderID string, until, now time.Time) (cart.Cart, error) {
	r, p, done := d.pick()
	defer done()
	c, err := r.BeginCheckout(ctx, owner, orderID, until, now)
	d.mirror(ctx, p, owner, c.ID)
	return c, err
}

func (d *migratingCarts) EndCheckout(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error {
	r, p, done := d.pick()
	defer done()
	err := r.EndCheckout(ctx, owner, cartID, orderID, now)
	d.mirror(ctx, p, owner, cartID)
	return err
}

func (d *migratingCarts) Reopen(ctx context.Context, owner cart.Owner, cartID string, now time.Time) (cart.Cart, error) {
	r, p, done := d.pick()
	defer done()
	c, err := r.Reopen(ctx, owner, cartID, now)
	d.mirror(ctx, p, owner, cartID, c.ID)
	return c, err
}

func (d *migratingCarts) MarkOrdered(ctx context.Context, owner cart.Owner, cartID, orderID string, now time.Time) error {
	r, p, done := d.pick()
	defer done()
	err := r.MarkOrdered(ctx, owner, cartID, orderID, now)
	d.mirror(ctx, p, owner, cartID)
	return err
}

// PurgeExpired purges where the family is served; Cassandra's TTLs drop expired copies.
func (d *migratingCarts) PurgeExpired(ctx context.Context, now time.Time) (int, error) {
	r, _, done := d.pick()
	defer done()
	return r.PurgeExpired(ctx, now)
}

// ---- events

type migratingEvents struct{ pair[event.Repository] }

func (d *migratingEvents) AppendEvent(ctx context.Context, e event.Event) error {
	r, p, done := d.pick()
	defer done()
	err := r.AppendEvent(ctx, e)
	if p == migrate.PhaseNone {
		return err
	}
	cctx, cancel := detach(ctx)
	defer cancel()
	switch {
	case err == nil:
		// An event never changes: the same record in both stores is the whole copy.
		d.m.failed(Events, e.ID, d.other(p).AppendEvent(cctx, e))
	case p.Mirrors():
		// The old store may have taken it all the same (a timeout, a client that hung up):
		// copy what it holds.
		d.m.failed(Events, e.ID, d.m.mirror.Keys(cctx, migrate.Events, e.ID))
	}
	return err
}

func (d *migratingEvents) ListEvents(ctx context.Context, q event.Query) (paging.Page[event.Event], error) {
	r, _, done := d.pick()
	defer done()
	return r.ListEvents(ctx, q)
}

func (d *migratingEvents) PurgeEvents(ctx context.Context, before time.Time) (int, error) {
	r, _, done := d.pick()
	defer done()
	return r.PurgeEvents(ctx, before)
}

// ---- history

type migratingHistory struct{ pair[history.Repository] }

// UpsertEntry writes the projector's entry to both stores: it is a whole state, and the
// projector applies one order's changes in order. A failed copy is returned, not only
// reported: the projector retries the message (both writes are idempotent), so no entry is
// left behind; while Cassandra is down that holds the projector back.
func (d *migratingHistory) UpsertEntry(ctx context.Context, e history.Entry) error {
	r, p, done := d.pick()
	defer done()
	if err := r.UpsertEntry(ctx, e); err != nil {
		return err
	}
	if p == migrate.PhaseNone {
		return nil
	}
	err := d.other(p).UpsertEntry(ctx, e)
	d.m.failed(History, e.OrderID, err)
	return err
}

func (d *migratingHistory) ListHistory(ctx context.Context, userID string, page paging.Request) (paging.Page[history.Entry], error) {
	r, _, done := d.pick()
	defer done()
	return r.ListHistory(ctx, userID, page)
}

// ---- catalog

// migratingCatalog serves product reads from the old store until cutover, then from
// Cassandra's read model.
type migratingCatalog struct{ pair[CatalogReader] }

// catalogSink feeds Cassandra's catalog read model from the projector while the catalog is
// being migrated or cut over; before, it drops changes. The projector's checkpoint makes it
// durable: a failed write is retried, never skipped.
type catalogSink struct {
	neu projection.CatalogSink
	ph  *familyPhase
}

func (s *catalogSink) UpsertProduct(ctx context.Context, p catalog.Product) error {
	phase, done := s.ph.begin()
	defer done()
	if phase == migrate.PhaseNone {
		return nil
	}
	return s.neu.UpsertProduct(ctx, p)
}

// ---- watching the state

// MigrationPhases returns the phase this process applies to each migrating family.
func (s *Stores) MigrationPhases() map[Family]migrate.Phase {
	out := map[Family]migrate.Phase{}
	if s.migration == nil {
		return out
	}
	for f, p := range s.migration.phases {
		out[f] = p.get()
	}
	return out
}

// RefreshMigrations reads the migration state once, applies it, and reports the applied
// phases as writer (a heartbeat that lives 15 s).
func (s *Stores) RefreshMigrations(ctx context.Context, writer string) error {
	m := s.migration
	if m == nil {
		return nil
	}
	states, err := m.target.States(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for f, ph := range m.phases {
		st := states[migrate.Family(f)]
		ph.set(st.Phase)
		if err := m.target.Heartbeat(ctx, migrate.Family(f), writer, st.Phase); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WatchMigrations refreshes the migration state every `every` until ctx ends, calling
// applied with the phases after each refresh.
func (s *Stores) WatchMigrations(ctx context.Context, writer string, every time.Duration, onErr func(error), applied func(map[Family]migrate.Phase)) {
	if s.migration == nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.RefreshMigrations(ctx, writer); err != nil && onErr != nil && ctx.Err() == nil {
			onErr(fmt.Errorf("refresh migration state: %w", err))
		}
		if applied != nil {
			applied(s.MigrationPhases())
		}
	}
}

func (d *migratingCatalog) GetProduct(ctx context.Context, id string) (catalog.Product, error) {
	r, _, done := d.pick()
	defer done()
	return r.GetProduct(ctx, id)
}

func (d *migratingCatalog) SearchProducts(ctx context.Context, q catalog.Search) (paging.Page[catalog.Product], error) {
	r, _, done := d.pick()
	defer done()
	return r.SearchProducts(ctx, q)
}

// mirrorSources open the old store a mirror reads changed keys back from, per backend.
var mirrorSources = map[string]func(ctx context.Context, o Options) (migrate.MirrorSource, func() error, error){
	SQLite: func(ctx context.Context, o Options) (migrate.MirrorSource, func() error, error) {
		src, err := migrate.OpenSource(ctx, o.SQLitePath)
		if err != nil {
			return nil, nil, err
		}
		src.Retention = o.EventRetention
		return src, src.Close, nil
	},
	Mongo: func(ctx context.Context, o Options) (migrate.MirrorSource, func() error, error) {
		src, err := migrate.OpenMongoSource(ctx, o.MongoURI, o.MongoDatabase)
		if err != nil {
			return nil, nil, err
		}
		src.Retention = o.EventRetention
		return src, src.Close, nil
	},
}

// migratable are the families a migration can move to Cassandra.
var migratable = []Family{Sessions, Carts, Events, History, Catalog}

// openMigrations wraps the families cfg keeps in an old store with the migration layer,
// opening Cassandra if the placement did not, and applies the current state once.
func (s *Stores) openMigrations(ctx context.Context, cfg Config, o Options, opened map[string]backend) error {
	cb, ok := opened[Cassandra].(cassandraBackend)
	if !ok {
		b, err := openCassandra(ctx, o)
		if err != nil {
			return fmt.Errorf("migrations: open cassandra: %w", err)
		}
		opened[Cassandra] = b
		s.closers = append(s.closers, b.Close)
		s.pings = append(s.pings, namedPing{backend: Cassandra, ping: b.Ping})
		cb = b.(cassandraBackend)
	}
	target := migrate.NewTarget(cb.st.Session())
	target.Retention = o.EventRetention
	m := &migration{phases: map[Family]*familyPhase{}, target: target, onError: o.MigrationError}
	mirrors := map[string]*migrate.Mirror{}
	mirrorFor := func(backend string) (*migrate.Mirror, error) {
		if mr, ok := mirrors[backend]; ok {
			return mr, nil
		}
		open, ok := mirrorSources[backend]
		if !ok {
			return nil, fmt.Errorf("migrations: no migration source for backend %s", backend)
		}
		src, closeSrc, err := open(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("migrations: open the %s source: %w", backend, err)
		}
		s.closers = append(s.closers, closeSrc)
		mr := &migrate.Mirror{Src: src, Dst: m.target}
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
		switch f {
		case Sessions:
			s.Sessions = &migratingSessions{pair[session.Repository]{old: s.Sessions, neu: cb.Sessions(), m: fm, ph: ph}}
		case Carts:
			s.Carts = &migratingCarts{pair[cart.Repository]{old: s.Carts, neu: cb.Carts(), m: fm, ph: ph}}
		case Events:
			s.Events = &migratingEvents{pair[event.Repository]{old: s.Events, neu: cb.Events(), m: fm, ph: ph}}
		case History:
			s.History = &migratingHistory{pair[history.Repository]{old: s.History, neu: cb.History(), m: fm, ph: ph}}
		case Catalog:
			s.Catalog = &migratingCatalog{pair[CatalogReader]{old: s.Catalog, neu: cb.Catalog(), ph: ph}}
			s.CatalogSink = &catalogSink{neu: cb.CatalogSink(), ph: ph}
		}
	}
	s.migration = m
	// Apply the state before serving anything: a family cut over must never be served from
	// the old store, even for the first request after a restart.
	states, err := m.target.States(ctx)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	for f, ph := range m.phases {
		ph.set(states[migrate.Family(f)].Phase)
	}
	return nil
}
