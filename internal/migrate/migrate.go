// Package migrate moves data families (sessions, carts, order history, events, the catalog
// read model) from the embedded store (SQLite) or MongoDB into Cassandra with the shop
// running (MIG-1, docs/migration.md): the backfill copies a family by key range and
// checkpoints every range in Cassandra, so a killed run resumes without losing or duplicating
// a row (backfill.go); Verify compares both sides with per-range counts and checksums
// (verify.go); Mirror is the shop's dual write of a changed key (mirror.go); the phases a
// family goes through are phase.go's; Open opens an old store and the target (open.go).
// Each family is one file, family_<name>.go, behind the family interface (family.go).
//
// Ranges: a range is a half-open interval of a family's key (session, cart, order, event or
// product id), cut from the old store's key quantiles. The source reads a range with an index
// range scan; the first range starts at "" and the last is unbounded, so a key of any shape
// still falls in exactly one range.
//
// Ordering with later writes: every backfilled cell carries USING TIMESTAMP = the row's last
// modification (µs, Row.Modified, one rule per family whichever store it is read from). A dual write or a delete made after the read carries the current time,
// a later timestamp, so it wins whatever order the two reach Cassandra in, and replaying a
// range never overwrites it. Empty optional columns are left unset rather than written null:
// a null is a tombstone, which would win a timestamp tie against a later equal-timestamp value.
//
// MongoDB as the target (MongoTarget, mongotarget.go; sessions, carts, history and events from
// the embedded store) has no cell timestamps: every write is an upsert conditional on a version
// (Row.Modified for a backfilled row, the time of its read for a dual write), a duplicate-key
// answer meaning a newer document is there; a delete made during the backfill is a tombstone
// the backfill checks after writing each range, so a deleted session or cart is not
// resurrected. The state, runs and checkpoints live in the same database.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/session"
)

// Family is a data family the engine moves (internal/family declares them).
type Family = family.Name

// The families the engine moves.
const (
	Sessions = family.Sessions
	Carts    = family.Carts
	History  = family.History
	Events   = family.Events
	Catalog  = family.Catalog
)

// Families lists every family the engine moves, in the order a full migration takes them.
var Families = family.ToCassandra()

// ParseFamily accepts a family name.
func ParseFamily(s string) (Family, error) {
	f, err := family.ParseMigratable(s)
	if err != nil {
		return "", fmt.Errorf("migrate: %w", err)
	}
	return f, nil
}

// codecOf is f's entry in the registry.
func codecOf(f Family) (codec, error) {
	if fam, ok := registry[f]; ok {
		return fam, nil
	}
	return nil, fmt.Errorf("migrate: family %q: want one of %s", f, family.Join(Families))
}

// Reader is the old store's side of a migration: the embedded store (Source) or MongoDB.
type Reader interface {
	// Read returns the rows of family f whose keys are in r, ordered by key, from one
	// consistent snapshot of each row (a cart with its lines).
	Read(ctx context.Context, f Family, r Range) ([]Row, error)
	// Count is the number of rows of f, for a plan's estimate (expired rows included).
	Count(ctx context.Context, f Family) (int64, error)
	// Split returns up to n ranges holding about the same number of rows of f, from the
	// keys' quantiles (SplitKeys): UUID v7 keys start with their time, so fixed hex-prefix
	// ranges would put a whole table in one or two ranges.
	Split(ctx context.Context, f Family, n int) ([]Range, error)
}

// SplitKeys turns sorted, distinct split points into contiguous ranges covering every key:
// the first starts at "" and the last is unbounded, so a key written after the split still
// falls in exactly one range.
func SplitKeys(points []string) []Range {
	rs := []Range{{ID: 0}}
	for _, p := range points {
		if p == "" || p <= rs[len(rs)-1].Lo {
			continue
		}
		rs[len(rs)-1].Hi = p
		rs = append(rs, Range{ID: len(rs), Lo: p})
	}
	return rs
}

// splitStep is how many keys of f each of n ranges holds (Count/n), 0 when f fits in one.
func splitStep(ctx context.Context, r Reader, f Family, n int) (int64, error) {
	if n <= 1 {
		return 0, nil
	}
	total, err := r.Count(ctx, f)
	return total / int64(n), err
}

// Range is the half-open key interval [Lo, Hi); Hi "" is unbounded.
type Range struct {
	ID     int
	Lo, Hi string
}

// keyOnly is the range holding exactly key.
func keyOnly(key string) Range { return Range{Lo: key, Hi: key + "\x00"} }

func (r Range) contains(key string) bool {
	return key >= r.Lo && (r.Hi == "" || key < r.Hi)
}

func rangeOf(rs []Range, key string) int {
	// Ranges are sorted and contiguous: binary search on Lo.
	lo, hi := 0, len(rs)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if key >= rs[mid].Lo {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// Row is one source row; exactly one of the family pointers is set.
type Row struct {
	Key      string
	Modified time.Time // the timestamp its Cassandra cells get
	Expires  time.Time // zero: never
	Session  *session.Session
	Cart     *cart.Cart
	Entry    *history.Entry   // history
	Event    *event.Event     // events
	Product  *catalog.Product // catalog

	// A product read back from Cassandra carries the search rows found for it (scanned), so
	// verify compares them with the ones its state calls for.
	search  []string
	scanned bool
}

// expired reports a row that must not be copied (or compared): it is gone, or goes within margin.
func (r Row) expired(now time.Time, margin time.Duration) bool {
	return !r.Expires.IsZero() && !r.Expires.After(now.Add(margin))
}

// ErrDifferences is what Verify returns (wrapped) when the two sides differ.
var ErrDifferences = errors.New("migrate: source and target differ")

func latest(ts ...time.Time) time.Time {
	var m time.Time
	for _, t := range ts {
		if t.After(m) {
			m = t
		}
	}
	return m
}
