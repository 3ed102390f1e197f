package migrate

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// CartReader reads what a cart mirror copies: the named carts of one owner and the owner's
// active cart id ("" for none), from one snapshot.
type CartReader interface {
	ReadCarts(ctx context.Context, owner cart.Owner, ids []string) (rows []Row, active string, err error)
}

// MirrorSource is an old store the dual-write phase copies changed keys from.
type MirrorSource interface {
	Reader
	CartReader
}

// Mirror is the dual-write phase's writer: after the old store (the source of truth) commits
// a change, the shop calls Mirror with the keys it changed, and Mirror reads their current
// state from the old store and replaces them in Cassandra at the current time.
//
// Why re-read instead of replaying the operation: a cart operation in Cassandra would mint
// its own cart ids and condition on rows the backfill may not have copied yet; the state read
// back from the source of truth is what Cassandra must hold, whatever ran before.
//
// Ordering: each replacement is a tombstone at ts-1 over the key's old cells and the new
// cells at ts, ts being now (µs). The backfill writes a row at its last change in the
// source, before any mirror of a later change, so a backfilled row never beats a mirrored
// one, and a delete in the source (a revoked session) is a tombstone the backfill cannot
// undo. Two mirrors of one key are serialized by a lock here and each reads after taking it,
// so the later read gets the later timestamp; across shop processes two mirrors of one key
// within the same microsecond window could still land out of order, which verify reports
// and `verify --repair` fixes (docs/migration.md).
type Mirror struct {
	Src   MirrorSource
	Dst   *Target
	Now   func() time.Time
	locks [256]sync.Mutex
	mu    sync.Mutex
	last  int64 // the last timestamp given, so this process's timestamps only increase
}

func (m *Mirror) lock(key string) func() {
	h := fnv.New32a()
	h.Write([]byte(key))
	l := &m.locks[h.Sum32()%uint32(len(m.locks))]
	l.Lock()
	return l.Unlock
}

// stamp returns a timestamp after every one this mirror gave before.
func (m *Mirror) stamp() time.Time {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	ts := max(now.UnixMicro(), m.last+1)
	m.last = ts
	return time.UnixMicro(ts)
}

// Keys copies keys of f (sessions, history, catalog) as the old store holds them now; a
// session gone from it (revoked, purged) is deleted.
func (m *Mirror) Keys(ctx context.Context, f Family, keys ...string) error {
	for _, k := range keys {
		if err := m.key(ctx, f, k); err != nil {
			return err
		}
	}
	return nil
}

func (m *Mirror) key(ctx context.Context, f Family, key string) error {
	defer m.lock(string(f) + "/" + key)()
	rows, err := m.Src.Read(ctx, f, Range{Lo: key, Hi: key + "\x00"})
	if err != nil {
		return err
	}
	ts := m.stamp()
	for i := range rows {
		rows[i].Modified = ts
	}
	switch f {
	case Catalog:
		// A repair: the old store's state wins over whatever the read model holds.
		for _, r := range rows {
			if err := cassandrastore.NewCatalog(m.Dst.s).UpsertProduct(ctx, *r.Product); err != nil {
				return err
			}
		}
		return nil
	case Sessions:
	default:
		_, err = m.Dst.Write(ctx, f, rows, m.now())
		return err
	}
	b := m.Dst.s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(gocql.Quorum)
	b.Query(`DELETE FROM sessions USING TIMESTAMP ? WHERE session_id = ?`, ts.UnixMicro()-1, key)
	for _, r := range rows {
		if ttl := ttlLeft(r.Expires, m.now()); ttl >= 0 {
			m.Dst.sessionStatement(b, r, ttl)
		}
	}
	if err := b.ExecContext(ctx); err != nil {
		return fmt.Errorf("migrate: mirror session %s: %w", key, err)
	}
	return nil
}

func (m *Mirror) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Carts copies carts ids of owner as the old store holds them now, and the owner's active
// cart: a cart gone from the old store is deleted, the rest are replaced whole (a line
// removed there is removed here).
func (m *Mirror) Carts(ctx context.Context, owner cart.Owner, ids ...string) error {
	defer m.lock("c/" + owner.Key())()
	// The cart Cassandra holds as active too: an operation that starts a new cart abandons
	// the previous one (a stale or expired active cart) without naming it.
	prev, err := m.Dst.activeCart(ctx, owner)
	if err != nil {
		return err
	}
	if prev != "" && !slices.Contains(ids, prev) {
		ids = append(ids, prev)
	}
	rows, active, err := m.Src.ReadCarts(ctx, owner, ids)
	if err == nil && active != "" && !slices.Contains(ids, active) {
		// The operation did not name the cart that is active now (it failed, or its answer was
		// lost): read it too, in one snapshot with the rest.
		ids = append(ids, active)
		rows, active, err = m.Src.ReadCarts(ctx, owner, ids)
	}
	if err != nil {
		return err
	}
	ts := m.stamp()
	tsv := ts.UnixMicro()
	now := m.now()
	table, key, val := cartTable(owner)
	b := m.Dst.s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(gocql.Quorum)
	for _, id := range ids {
		cid, err := TimeUUID(id)
		if err != nil {
			return err
		}
		b.Query(fmt.Sprintf(`DELETE FROM %s USING TIMESTAMP ? WHERE %s = ? AND cart_id = ?`, table, key), tsv-1, val, cid)
	}
	activeTTL := 0
	for _, r := range rows {
		ttl := ttlLeft(r.Expires, now)
		if ttl < 0 {
			continue
		}
		if r.Key == active {
			activeTTL = ttl
		}
		r.Modified = ts
		if err := m.Dst.cartStatements(b, r, ttl, false); err != nil {
			return err
		}
	}
	var act any // null: no active cart
	if active != "" {
		id, err := TimeUUID(active)
		if err != nil {
			return err
		}
		act = id
	}
	b.Query(fmt.Sprintf(`UPDATE %s USING TIMESTAMP ? AND TTL ? SET active_cart = ? WHERE %s = ?`, table, key), tsv, activeTTL, act, val)
	if err := b.ExecContext(ctx); err != nil {
		return fmt.Errorf("migrate: mirror %s carts: %w", owner.Key(), err)
	}
	return nil
}

// Rows writes rows of an append-only or whole-state family (events, history, catalog) at
// the current time: the shop hands over what it just wrote to the old store.
func (m *Mirror) Rows(ctx context.Context, f Family, rows ...Row) error {
	ts := m.stamp()
	for i := range rows {
		rows[i].Modified = ts
	}
	_, err := m.Dst.Write(ctx, f, rows, m.now())
	return err
}
