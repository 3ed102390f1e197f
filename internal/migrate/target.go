package migrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/session"
)

// Target writes into the Cassandra keyspace of s (schema applied by cassandrastore.ApplySchema,
// version 4 or later for the checkpoints table). Writes are at QUORUM, so a range's
// checkpoint follows writes a quorum acknowledged.
//
// Carts are edited with lightweight transactions in Cassandra, and the backfill writes them
// with plain timestamped writes (USING TIMESTAMP is not even allowed on an LWT). Mixing the two
// on one partition is safe here because, and only while, nothing reads or conditions on the
// backfilled partitions through Paxos before they are complete: until cutover the embedded
// store is the source of truth and Cassandra's carts are not served. What mixing breaks is
// linearizability of a plain write racing an LWT's read-then-write; a backfilled cell is
// older (its timestamp is the source's last change) than any later LWT's ballot timestamp,
// so the LWT's write wins and the backfill can only fill cells nobody has written since.
// It requires clocks kept in sync (NTP): a source clock ahead of the Cassandra coordinators
// by more than the time between a change and its dual write could let a backfilled value win.
type Target struct {
	s *gocql.Session
	// Retention is how long events live after their time (0: event.DefaultRetention).
	Retention time.Duration
}

// NewTarget uses s, whose keyspace is the shop's.
func NewTarget(s *gocql.Session) *Target { return &Target{s: s} }

const sessionWrite = `INSERT INTO sessions (session_id, user_id, created_at, last_active, expires_at, ip, user_agent, status, data)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ? AND TTL ?`

// ttlLeft is the seconds left until exp, rounded up so a row never dies before its expiry;
// 0 (no TTL) for exp zero; -1 for a row already expired.
func ttlLeft(exp, now time.Time) int {
	if exp.IsZero() {
		return 0
	}
	d := exp.Sub(now)
	if d <= 0 {
		return -1
	}
	return int(min(math.Ceil(d.Seconds()), 630720000)) // Cassandra's limit, 20 years
}

func ms(t time.Time) any {
	if t.IsZero() {
		return gocql.UnsetValue
	}
	return t.UTC().Truncate(time.Millisecond)
}

func unsetIfEmpty(s string) any {
	if s == "" {
		return gocql.UnsetValue
	}
	return s
}

func canonIP(s string) net.IP {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	return net.ParseIP(s)
}

// writeConcurrency bounds the writes one Write keeps in flight; the driver pipelines them on
// its connections, so a range costs about len(rows)/writeConcurrency round trips, not len(rows).
const writeConcurrency = 32

// Write upserts rows, skipping the already expired ones, and returns how many it skipped.
// Every write is an idempotent upsert, so writing a range again changes nothing. Writes run
// concurrently; Write returns once every one was acknowledged, or the first error.
func (t *Target) Write(ctx context.Context, f Family, rows []Row, now time.Time) (skipped int, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, writeConcurrency)
	var wg sync.WaitGroup
	for _, r := range rows {
		ttl := ttlLeft(r.Expires, now)
		if ttl < 0 {
			skipped++
			continue
		}
		var write func() error
		switch {
		case f == Sessions && r.Session != nil:
			write = func() error { return t.writeSession(ctx, r, ttl) }
		case f == Carts && r.Cart != nil:
			write = func() error { return t.writeCart(ctx, r, ttl) }
		case f == History || f == Events || f == Catalog:
			write = func() error { return t.writeWhole(ctx, f, r) }
		default:
			cancel(fmt.Errorf("migrate: write %s %s: row is not a %s row", f, r.Key, f))
		}
		if write != nil {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := write(); err != nil {
				cancel(fmt.Errorf("migrate: write %s %s: %w", f, r.Key, err))
			}
			<-sem
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return skipped, err
	}
	return skipped, nil
}

func (t *Target) writeSession(ctx context.Context, r Row, ttl int) error {
	b := t.s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(gocql.Quorum)
	t.sessionStatement(b, r, ttl)
	return b.ExecContext(ctx)
}

// sessionStatement adds the write of session row r to b.
func (t *Target) sessionStatement(b *gocql.Batch, r Row, ttl int) {
	s := r.Session
	var ip any = gocql.UnsetValue
	if v := canonIP(s.IP); v != nil {
		ip = v
	}
	data := s.Data
	if data == nil {
		data = map[string]string{}
	}
	b.Query(sessionWrite, s.ID, unsetIfEmpty(s.UserID), ms(s.CreatedAt), ms(s.LastActive), ms(s.ExpiresAt),
		ip, s.UserAgent, string(s.Status), data, r.Modified.UnixMicro(), ttl)
}

func cartTable(o cart.Owner) (table, key, val string) {
	if o.IsGuest() {
		return "guest_carts", "session_id", o.SessionID
	}
	return "user_carts", "user_id", o.UserID
}

// writeCart writes a cart's header row, its lines and, for the active cart, the partition's
// active_cart, in one single-partition unlogged batch (atomic on the partition, no batchlog).
func (t *Target) writeCart(ctx context.Context, r Row, ttl int) error {
	b := t.s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(gocql.Quorum)
	if err := t.cartStatements(b, r, ttl, true); err != nil {
		return err
	}
	return b.ExecContext(ctx)
}

// cartStatements adds the writes of cart row r to b: its header row, its lines and, with
// active set and an active cart, the partition's active_cart.
func (t *Target) cartStatements(b *gocql.Batch, r Row, ttl int, active bool) error {
	c := r.Cart
	id, err := TimeUUID(c.ID)
	if err != nil {
		return err
	}
	table, key, owner := cartTable(c.Owner)
	tsv := r.Modified.UnixMicro()
	b.Query(fmt.Sprintf(`UPDATE %s USING TIMESTAMP ? AND TTL ? SET status = ?, order_id = ?, created_at = ?, updated_at = ?,
		expires_at = ?, checkout_order = ?, checkout_until = ? WHERE %s = ? AND cart_id = ? AND product_id = ''`, table, key),
		tsv, ttl, string(c.Status), unsetIfEmpty(c.OrderID), ms(c.CreatedAt), ms(c.UpdatedAt), ms(c.ExpiresAt),
		unsetIfEmpty(c.CheckoutOrder), ms(c.CheckoutUntil), owner, id)
	if active && c.Status == cart.Active {
		b.Query(fmt.Sprintf(`UPDATE %s USING TIMESTAMP ? AND TTL ? SET active_cart = ? WHERE %s = ?`, table, key), tsv, ttl, id, owner)
	}
	for _, it := range c.Items {
		b.Query(fmt.Sprintf(`UPDATE %s USING TIMESTAMP ? AND TTL ? SET category = ?, quantity = ?, added_at = ?
			WHERE %s = ? AND cart_id = ? AND product_id = ?`, table, key), tsv, ttl, it.Category, it.Quantity, ms(it.AddedAt), owner, id, it.ProductID)
	}
	return nil
}

// uuidEpoch is 1970-01-01 in 100 ns ticks since the Gregorian epoch of version 1 UUIDs.
const uuidEpoch = 0x01B21DD213814000

// TimeUUID maps the embedded store's version 7 cart id onto the version 1 UUID (timeuuid)
// Cassandra's cart_id column requires, losslessly: the v7 millisecond becomes the v1 time,
// its 12 random bits the sub-millisecond ticks (4096 < 10,000 per ms), and its last 8 bytes
// (variant and 62 random bits) the clock sequence and node. Carts stay ordered by creation.
func TimeUUID(v7 string) (gocql.UUID, error) {
	u, err := uuid.Parse(v7)
	if err == nil && u.Version() == 1 {
		// A cart created in Cassandra (during a cutover) and copied back by a rollback keeps
		// its timeuuid: SourceID returned it as it is.
		return gocql.UUID(u), nil
	}
	if err != nil || u.Version() != 7 {
		return gocql.UUID{}, fmt.Errorf("cart id %q: want a version 7 UUID", v7)
	}
	msec := uint64(u[0])<<40 | uint64(u[1])<<32 | uint64(u[2])<<24 | uint64(u[3])<<16 | uint64(u[4])<<8 | uint64(u[5])
	randA := uint64(u[6]&0x0f)<<8 | uint64(u[7])
	ts := msec*10000 + randA + uuidEpoch
	var g gocql.UUID
	g[0], g[1], g[2], g[3] = byte(ts>>24), byte(ts>>16), byte(ts>>8), byte(ts)
	g[4], g[5] = byte(ts>>40), byte(ts>>32)
	g[6], g[7] = byte(ts>>56)&0x0f|0x10, byte(ts>>48)
	copy(g[8:], u[8:])
	return g, nil
}

// SourceID reverses TimeUUID; a timeuuid that no v7 id maps to (a cart created in Cassandra)
// is returned as it is.
func SourceID(g gocql.UUID) string {
	ts := uint64(g[6]&0x0f)<<56 | uint64(g[7])<<48 | uint64(g[4])<<40 | uint64(g[5])<<32 |
		uint64(g[0])<<24 | uint64(g[1])<<16 | uint64(g[2])<<8 | uint64(g[3])
	if g.Version() != 1 || ts < uuidEpoch || (ts-uuidEpoch)%10000 >= 4096 {
		return g.String()
	}
	msec, randA := (ts-uuidEpoch)/10000, (ts-uuidEpoch)%10000
	var u uuid.UUID
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(msec>>40), byte(msec>>32), byte(msec>>24), byte(msec>>16), byte(msec>>8), byte(msec)
	u[6], u[7] = 0x70|byte(randA>>8), byte(randA)
	copy(u[8:], g[8:])
	return u.String()
}

// Scan reads every row of family f back from Cassandra, in the shape Source.Read returns, for
// Verify. It is a full-table scan (paged), once per verify, not once per range: the tables are
// partitioned by owner or session, not by the source's key ranges.
func (t *Target) Scan(ctx context.Context, f Family, fn func(Row) error) error {
	switch f {
	case Sessions:
		return t.scanSessions(ctx, fn)
	case History:
		return t.scanHistory(ctx, fn)
	case Events:
		return t.scanEvents(ctx, fn)
	case Catalog:
		return t.scanCatalog(ctx, fn)
	case Carts:
		for _, g := range []bool{false, true} {
			if err := t.scanCarts(ctx, g, "", fn); err != nil {
				return err
			}
		}
		return nil
	}
	return f.valid()
}

func (t *Target) scanSessions(ctx context.Context, fn func(Row) error) error {
	iter := t.s.Query(`SELECT session_id, user_id, created_at, last_active, expires_at, ip, user_agent, status, data FROM sessions`).
		WithContext(ctx).Consistency(gocql.Quorum).PageSize(1000).Iter()
	for {
		var s session.Session
		var user, status *string
		var ip net.IP
		if !iter.Scan(&s.ID, &user, &s.CreatedAt, &s.LastActive, &s.ExpiresAt, &ip, &s.UserAgent, &status, &s.Data) {
			break
		}
		if user != nil {
			s.UserID = *user
		}
		if status != nil {
			s.Status = session.Status(*status)
		}
		if ip != nil {
			s.IP = ip.String()
		}
		if err := fn(Row{Key: s.ID, Expires: s.ExpiresAt, Session: &s}); err != nil {
			iter.Close()
			return err
		}
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("migrate: scan sessions: %w", err)
	}
	return nil
}

// scanCarts reads the user or guest carts table, or with owner set only that owner's partition.
func (t *Target) scanCarts(ctx context.Context, guest bool, owner string, fn func(Row) error) error {
	table, key, _ := cartTable(cart.User("x"))
	if guest {
		table, key, _ = cartTable(cart.Guest("x"))
	}
	// Rows come partition by partition, a cart's rows together: emit a cart when the next begins.
	stmt := fmt.Sprintf(`SELECT %s, cart_id, product_id, status, order_id, created_at, updated_at, expires_at,
		checkout_order, checkout_until, category, quantity, added_at FROM %s`, key, table)
	var args []any
	if owner != "" {
		stmt += fmt.Sprintf(` WHERE %s = ?`, key)
		args = append(args, owner)
	}
	iter := t.s.Query(stmt, args...).WithContext(ctx).Consistency(gocql.Quorum).PageSize(1000).Iter()
	var cur *cart.Cart
	var curID gocql.UUID
	flush := func() error {
		if cur == nil {
			return nil
		}
		c := cur
		cur = nil
		return fn(Row{Key: c.ID, Expires: c.ExpiresAt, Cart: c})
	}
	for {
		var owner, pid, status, orderID, co, category string
		var id gocql.UUID
		var created, updated, expires, until, added time.Time
		var qty int64
		if !iter.Scan(&owner, &id, &pid, &status, &orderID, &created, &updated, &expires, &co, &until, &category, &qty, &added) {
			break
		}
		if id == (gocql.UUID{}) { // a partition holding only its static column
			continue
		}
		if cur == nil || id != curID {
			if err := flush(); err != nil {
				iter.Close()
				return err
			}
			o := cart.User(owner)
			if guest {
				o = cart.Guest(owner)
			}
			cur, curID = &cart.Cart{ID: SourceID(id), Owner: o}, id
		}
		if pid == "" {
			cur.Status, cur.OrderID, cur.CheckoutOrder = cart.Status(status), orderID, co
			cur.CreatedAt, cur.UpdatedAt, cur.ExpiresAt, cur.CheckoutUntil = created, updated, expires, until
			continue
		}
		if qty > 0 {
			cur.Items = append(cur.Items, cart.Item{ProductID: pid, Category: category, Quantity: qty, AddedAt: added})
		}
	}
	err := flush()
	if cerr := iter.Close(); cerr != nil {
		return fmt.Errorf("migrate: scan %s: %w", table, cerr)
	}
	return err
}

// Checkpoint is a range a run has copied.
type Checkpoint struct {
	Range         Range
	Rows, Skipped int64
	At            time.Time
}

// Checkpoints returns run's copied ranges of f by range id.
func (t *Target) Checkpoints(ctx context.Context, run string, f Family) (map[int]Checkpoint, error) {
	iter := t.s.Query(`SELECT range_id, lo, hi, rows, skipped, done_at FROM migration_checkpoints WHERE run = ? AND family = ?`, run, string(f)).
		WithContext(ctx).Consistency(gocql.Quorum).Iter()
	out := map[int]Checkpoint{}
	var c Checkpoint
	for iter.Scan(&c.Range.ID, &c.Range.Lo, &c.Range.Hi, &c.Rows, &c.Skipped, &c.At) {
		out[c.Range.ID] = c
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("migrate: read checkpoints: %w", err)
	}
	return out, nil
}

func (t *Target) checkpoint(ctx context.Context, run string, f Family, c Checkpoint) error {
	err := t.s.Query(`INSERT INTO migration_checkpoints (run, family, range_id, lo, hi, rows, skipped, done_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		run, string(f), c.Range.ID, c.Range.Lo, c.Range.Hi, c.Rows, c.Skipped, c.At).
		WithContext(ctx).Consistency(gocql.Quorum).Idempotent(true).Exec()
	if err != nil {
		return fmt.Errorf("migrate: checkpoint %s range %d: %w", f, c.Range.ID, err)
	}
	return nil
}

// CartOwner finds who owns cart id in Cassandra (a repair of a cart only Cassandra holds):
// a full scan, for the few keys a verify lists.
func (t *Target) CartOwner(ctx context.Context, id string) (cart.Owner, error) {
	var found *cart.Owner
	errStop := errors.New("found")
	err := t.Scan(ctx, Carts, func(r Row) error {
		if r.Key == id {
			o := r.Cart.Owner
			found = &o
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return cart.Owner{}, err
	}
	if found == nil {
		return cart.Owner{}, fmt.Errorf("migrate: cart %s is in neither store", id)
	}
	return *found, nil
}

// OwnerCarts reads owner's carts from Cassandra with the embedded store's ids (SourceID) and
// the active one's id ("" for none): what a rollback path copies back to the old store.
func (t *Target) OwnerCarts(ctx context.Context, owner cart.Owner) ([]cart.Cart, string, error) {
	active, err := t.activeCart(ctx, owner)
	if err != nil {
		return nil, "", err
	}
	var cs []cart.Cart
	err = t.scanCarts(ctx, owner.IsGuest(), cartKey(owner), func(r Row) error {
		cs = append(cs, *r.Cart)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return cs, active, nil
}

func cartKey(o cart.Owner) string {
	_, _, val := cartTable(o)
	return val
}

// activeCart is the cart Cassandra holds as owner's active one, by its old-store id ("" for none).
func (t *Target) activeCart(ctx context.Context, owner cart.Owner) (string, error) {
	table, key, val := cartTable(owner)
	var act *gocql.UUID
	err := t.s.Query(fmt.Sprintf(`SELECT active_cart FROM %s WHERE %s = ? LIMIT 1`, table, key), val).
		WithContext(ctx).Consistency(gocql.Quorum).Scan(&act)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return "", fmt.Errorf("migrate: read %s active cart: %w", owner.Key(), err)
	}
	if act == nil || *act == (gocql.UUID{}) {
		return "", nil
	}
	return SourceID(*act), nil
}
