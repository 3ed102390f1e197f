package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// cartsFamily: keyed by the cart id (a UUID v7 in the old stores, its timeuuid in Cassandra:
// TimeUUID), a cart with its lines, living until its expiry (a guest cart's is its session's).
//
// Carts are edited with lightweight transactions in Cassandra, and the backfill writes them
// with plain timestamped writes (USING TIMESTAMP is not even allowed on an LWT). Mixing the two
// on one partition is safe here because, and only while, nothing reads or conditions on the
// backfilled partitions through Paxos before they are complete: until cutover the old store
// is the source of truth and Cassandra's carts are not served. What mixing breaks is
// linearizability of a plain write racing an LWT's read-then-write; a backfilled cell is
// older (its timestamp is the source's last change) than any later LWT's ballot timestamp,
// so the LWT's write wins and the backfill can only fill cells nobody has written since.
// It requires clocks kept in sync (NTP): a source clock ahead of the Cassandra coordinators
// by more than the time between a change and its dual write could let a backfilled value win.
type cartsFamily struct{ oldRows[cart.Cart] }

var cartRows = oldRows[cart.Cart]{
	table: "carts", key: "id", sel: sqlitestore.CartSelect,
	scan:   func(rs *sql.Rows) (cart.Cart, error) { return sqlitestore.ScanCart(rs) },
	coll:   mongoFamily{coll: mongostore.CartsCollection, key: "cart_id", index: "migrate_cart_id", snapshot: true},
	decode: mongostore.DecodeCart,
	row:    func(c *cart.Cart) Row { return Row{Key: c.ID, Cart: c} },
	of:     func(r Row) *cart.Cart { return r.Cart },
}

// readSQLite reads the headers, then the lines of the same range (tx: one snapshot).
func (f cartsFamily) readSQLite(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error) {
	out, err := f.oldRows.readSQLite(ctx, tx, r)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*cart.Cart, len(out))
	for _, row := range out {
		byID[row.Key] = row.Cart
	}
	where, args := keyRange("cart_id", r)
	rs, err := tx.QueryContext(ctx, sqlitestore.CartItemSelect+` WHERE `+where+` ORDER BY cart_id, product_id`, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	for rs.Next() {
		id, it, err := sqlitestore.ScanCartItem(rs)
		if err != nil {
			return nil, err
		}
		if c := byID[id]; c != nil {
			c.Items = append(c.Items, it)
		}
	}
	return out, rs.Err()
}

// stamp: a cart changes with its header (created, updated) or a line (added).
func (cartsFamily) stamp(r *Row, _ time.Duration) {
	c := r.Cart
	m := latest(c.CreatedAt, c.UpdatedAt)
	for _, it := range c.Items {
		m = latest(m, it.AddedAt)
	}
	r.Modified, r.Expires = m, c.ExpiresAt
}

// write writes the cart's header row, its lines and, for the active cart, the partition's
// active_cart, in one single-partition unlogged batch (atomic on the partition, no batchlog).
func (cartsFamily) write(ctx context.Context, t *Target, r Row, ttl int) error {
	id, err := TimeUUID(r.Cart.ID)
	if err != nil {
		return err
	}
	b := t.s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(t.quorum())
	cassandrastore.AddCartWrite(b, *r.Cart, id, r.Modified.UnixMicro(), ttl, true)
	return b.ExecContext(ctx)
}

func (cartsFamily) scan(ctx context.Context, t *Target, fn func(Row) error) error {
	for _, guest := range []bool{false, true} {
		if err := t.scanCarts(ctx, guest, "", fn); err != nil {
			return err
		}
	}
	return nil
}

// replace: carts are replaced by owner (Mirror.Carts); a key alone is written as it is.
func (cartsFamily) replace(ctx context.Context, t *Target, _ string, rows []Row, _, now time.Time) error {
	_, err := t.Write(ctx, Carts, rows, now)
	return err
}

func (cartsFamily) canonical(r Row, c *canon) {
	ct := r.Cart
	c.field("cart", ct.ID, ct.Owner.Key(), string(ct.Status), ct.OrderID, c.t(ct.CreatedAt), c.t(ct.UpdatedAt), c.t(ct.ExpiresAt), ct.CheckoutOrder, c.t(ct.CheckoutUntil))
	items := append(ct.Items[:0:0], ct.Items...)
	sort.Slice(items, func(i, j int) bool { return items[i].ProductID < items[j].ProductID })
	for _, it := range items {
		c.field(fmt.Sprintf("%s|%s|%d|%s", it.ProductID, it.Category, it.Quantity, c.t(it.AddedAt)))
	}
}

// scanCarts reads the user or guest carts table, or with owner set only that owner's
// partition, as rows with the old stores' cart ids (SourceID).
func (t *Target) scanCarts(ctx context.Context, guest bool, owner string, fn func(Row) error) error {
	err := cassandrastore.CartScan(ctx, t.s, guest, owner, func(c cart.Cart) error {
		id, err := gocql.ParseUUID(c.ID)
		if err != nil {
			return err
		}
		c.ID = SourceID(id)
		return fn(cartRows.row(&c))
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// cartTable is the table holding owner's carts, its key column and owner's key.
func cartTable(o cart.Owner) (table, key, val string) { return cassandrastore.CartTable(o) }
