package migrate

import (
	"cmp"
	"context"
	"database/sql"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// codec is everything the engine knows about one data family, in one file per family
// (family_<name>.go): how each old store holds it, when a row last changed, how it is
// written to and read back from Cassandra, and the canonical form verify hashes. Sources,
// the target, the mirror and verify dispatch through it, so a new family is one new file
// and one line in registry.
type codec interface {
	// sqlite is the embedded store's table holding the family and its key column.
	sqlite() (table, key string)
	// readSQLite returns the rows with keys in r, ordered by key, read in tx.
	readSQLite(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error)
	// mongo is the collection holding the family and the field holding its key.
	mongo() mongoFamily
	// decodeMongo turns a document into its row; retired marks the copy of a key that can
	// exist twice for a moment (a cart between its owner's slot and _id = cart_id).
	decodeMongo(raw bson.Raw) (row Row, retired bool, err error)
	// stamp sets the row's Modified (the write timestamp a backfill gives its cells) and
	// Expires from its value: one rule, whichever store the row was read from.
	stamp(r *Row, retention time.Duration)
	// holds reports whether r is a row of this family.
	holds(r Row) bool
	// write upserts r into Cassandra at r.Modified with ttl seconds to live (0: none).
	write(ctx context.Context, t *Target, r Row, ttl int) error
	// scan reads every row back from Cassandra (a paged full-table scan), for verify.
	scan(ctx context.Context, t *Target, fn func(Row) error) error
	// replace makes Cassandra hold exactly rows for key, at ts: what the old store holds now
	// (no row: the key is gone there). The dual-write phase and verify --repair use it.
	replace(ctx context.Context, t *Target, key string, rows []Row, ts, now time.Time) error
	// canonical writes the fields verify compares, in a fixed order.
	canonical(r Row, c *canon)
}

// registry holds every family the engine moves.
var registry = map[Family]codec{
	Sessions: sessionsFamily{sessionRows},
	Carts:    cartsFamily{cartRows},
	History:  historyFamily{historyRows},
	Events:   eventsFamily{eventRows},
	Catalog:  catalogFamily{productRows},
}

// oldRows is how the old stores hold a family whose rows carry a T, declared as data; a
// codec embeds it for sqlite, readSQLite, mongo, decodeMongo and holds.
type oldRows[T any] struct {
	// table and key are the embedded store's table and key column; sel reads its records,
	// naming the key selKey (key when empty), and scan reads one.
	table, key, sel, selKey string
	scan                    func(*sql.Rows) (T, error)
	// coll is the MongoDB collection; decode reads one of its documents.
	coll   mongoFamily
	decode func(bson.Raw) (v T, retired bool, err error)
	// row is the row holding v; of is the T row r holds (nil for another family's row).
	row func(v *T) Row
	of  func(r Row) *T
}

func (o oldRows[T]) sqlite() (string, string) { return o.table, o.key }

func (o oldRows[T]) readSQLite(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error) {
	col := cmp.Or(o.selKey, o.key)
	return readSQLiteRows(ctx, tx, o.sel, col, r, func(rs *sql.Rows) (Row, error) {
		v, err := o.scan(rs)
		return o.row(&v), err
	})
}

func (o oldRows[T]) mongo() mongoFamily { return o.coll }

func (o oldRows[T]) decodeMongo(raw bson.Raw) (Row, bool, error) {
	v, retired, err := o.decode(raw)
	return o.row(&v), retired, err
}

func (o oldRows[T]) holds(r Row) bool { return o.of(r) != nil }

// current is a MongoDB decoder for a family of which no document is ever a retired copy.
func current[T any](decode func(bson.Raw) (T, error)) func(bson.Raw) (T, bool, error) {
	return func(raw bson.Raw) (T, bool, error) {
		v, err := decode(raw)
		return v, false, err
	}
}

// familyOf is the family of row r (nil for a row of none).
func familyOf(r Row) codec {
	for _, f := range Families {
		if fam := registry[f]; fam.holds(r) {
			return fam
		}
	}
	return nil
}

// stampRows sets Modified and Expires on rows of f.
func stampRows(fam codec, rows []Row, retention time.Duration) []Row {
	for i := range rows {
		fam.stamp(&rows[i], retention)
	}
	return rows
}

// canon builds a canonical form: fields separated by 0x1f, times in milliseconds
// (Cassandra's precision), map entries sorted.
type canon struct{ b strings.Builder }

func (c *canon) field(vs ...string) {
	for _, v := range vs {
		c.b.WriteString(v)
		c.b.WriteByte(0x1f)
	}
}

func (c *canon) t(x time.Time) string {
	if x.IsZero() {
		return "0"
	}
	return strconv.FormatInt(x.UnixMilli(), 10)
}

func (c *canon) sortedMap(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c.field(k + "=" + m[k])
	}
}
