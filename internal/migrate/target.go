package migrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// Target writes into the Cassandra keyspace of s (schema applied by cassandrastore.ApplySchema,
// version 4 or later for the checkpoints table). Writes are at QUORUM, so a range's
// checkpoint follows writes a quorum acknowledged.
type Target struct {
	s *gocql.Session
	// Levels are the consistency levels of the shop's client (cassandrastore.Store.Levels);
	// zero: those of a client without a local DC.
	Levels cassandrastore.Levels
	// Retention is how long events live after their time (0: event.DefaultRetention).
	Retention time.Duration
}

// NewTarget uses s, whose keyspace is the shop's.
func NewTarget(s *gocql.Session) *Target { return &Target{s: s} }

// quorum is the level of the migration's data statements (rows copied, checkpoints): the
// client's quorum, LOCAL_QUORUM with a local DC, so a copy and its verification read each
// other's writes in the DC they run in.
func (t *Target) quorum() gocql.Consistency {
	if t.Levels == (cassandrastore.Levels{}) {
		return cassandrastore.LevelsFor("").Carts
	}
	return t.Levels.Carts
}

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

// canonIP is the address Cassandra holds for a session's ip.
var canonIP = cassandrastore.SessionIP

// writeConcurrency bounds the writes one Write keeps in flight; the driver pipelines them on
// its connections, so a range costs about len(rows)/writeConcurrency round trips, not len(rows).
const writeConcurrency = 32

// Write upserts rows, skipping the already expired ones, and returns how many it skipped.
// Every write is an idempotent upsert, so writing a range again changes nothing. Writes run
// concurrently; Write returns once every one was acknowledged, or the first error.
func (t *Target) Write(ctx context.Context, f Family, rows []Row, now time.Time) (skipped int, err error) {
	fam, err := codecOf(f)
	if err != nil {
		return 0, err
	}
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
		if fam.holds(r) {
			write = func() error { return fam.write(ctx, t, r, ttl) }
		} else {
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
	fam, err := codecOf(f)
	if err != nil {
		return err
	}
	return fam.scan(ctx, t, func(r Row) error {
		fam.stamp(&r, t.Retention)
		return fn(r)
	})
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
		WithContext(ctx).Consistency(t.quorum()).Iter()
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
		WithContext(ctx).Consistency(t.quorum()).Idempotent(true).Exec()
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
	_, _, key := cartTable(owner)
	err = t.scanCarts(ctx, owner.IsGuest(), key, func(r Row) error {
		cs = append(cs, *r.Cart)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return cs, active, nil
}

// activeCart is the cart Cassandra holds as owner's active one, by its old-store id ("" for none).
func (t *Target) activeCart(ctx context.Context, owner cart.Owner) (string, error) {
	act, err := cassandrastore.ActiveCartID(ctx, t.s, owner)
	if err != nil || act == nil {
		return "", err
	}
	return SourceID(*act), nil
}
