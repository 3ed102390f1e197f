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
	Src MirrorSource
	Dst *Target
	Now func() time.Time
	keyClock
}

// keyClock serializes a mirror's copies of one key and gives them increasing timestamps.
type keyClock struct {
	locks [256]sync.Mutex
	mu    sync.Mutex
	last  int64 // the last timestamp given, so this process's timestamps only increase
}

func (k *keyClock) lock(key string) func() {
	h := fnv.New32a()
	h.Write([]byte(key))
	l := &k.locks[h.Sum32()%uint32(len(k.locks))]
	l.Lock()
	return l.Unlock
}

// tick returns a timestamp after every one this clock gave before, now or later.
func (k *keyClock) tick(now time.Time) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	ts := max(now.UnixMicro(), k.last+1)
	k.last = ts
	return time.UnixMicro(ts)
}

// stamp returns a timestamp after every one this mirror gave before.
func (m *Mirror) stamp() time.Time { return m.tick(m.now()) }

// Keys copies keys of f as the old store holds them now (each family's replace); a session
// gone from it (revoked, purged) is deleted.
func (m *Mirror) Keys(ctx context.Context, f Family, keys ...string) error {
	for _, k := range keys {
		if err := m.key(ctx, f, k); err != nil {
			return err
		}
	}
	return nil
}

func (m *Mirror) key(ctx context.Context, f Family, key string) error {
	fam, err := codecOf(f)
	if err != nil {
		return err
	}
	defer m.lock(string(f) + "/" + key)()
	rows, err := m.Src.Read(ctx, f, keyOnly(key))
	if err != nil {
		return err
	}
	ts := m.stamp()
	for i := range rows {
		rows[i].Modified = ts
	}
	return fam.replace(ctx, m.Dst, key, rows, ts, m.now())
}

func (m *Mirror) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// readMirroredCarts reads, in one snapshot of the old store, the carts a cart operation of
// owner touched: ids, prev (the cart the new store holds as active) and the cart active in the
// old store now, which the operation did not name when it failed or its answer was lost. It
// returns ids with the ones it added.
func readMirroredCarts(ctx context.Context, src MirrorSource, owner cart.Owner, ids []string, prev string) ([]string, []Row, string, error) {
	if prev != "" && !slices.Contains(ids, prev) {
		ids = append(ids, prev)
	}
	rows, active, err := src.ReadCarts(ctx, owner, ids)
	if err == nil && active != "" && !slices.Contains(ids, active) {
		ids = append(ids, active)
		rows, active, err = src.ReadCarts(ctx, owner, ids)
	}
	return ids, rows, active, err
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
	ids, rows, active, err := readMirroredCarts(ctx, m.Src, owner, ids, prev)
	if err != nil {
		return err
	}
	ts := m.stamp()
	tsv := ts.UnixMicro()
	now := m.now()
	b := m.Dst.s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(m.Dst.quorum())
	for _, id := range ids {
		cid, err := TimeUUID(id)
		if err != nil {
			return err
		}
		cassandrastore.AddCartDelete(b, owner, cid, tsv-1)
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
		cid, err := TimeUUID(r.Cart.ID)
		if err != nil {
			return err
		}
		cassandrastore.AddCartWrite(b, *r.Cart, cid, tsv, ttl, false)
	}
	var act *gocql.UUID // nil: no active cart
	if active != "" {
		id, err := TimeUUID(active)
		if err != nil {
			return err
		}
		act = &id
	}
	cassandrastore.AddActiveCart(b, owner, act, tsv, activeTTL)
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
