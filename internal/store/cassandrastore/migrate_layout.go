package cassandrastore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/session"
)

// The session and cart layouts and the search-row rule as `shardmart migrate` writes and reads
// them: plain writes at a client timestamp (USING TIMESTAMP is not allowed on a lightweight
// transaction), into the same tables and columns the repositories use. An empty optional
// column is left unset rather than written null: a null is a tombstone, which would win a
// timestamp tie against a later write of a value.

func unsetIfEmpty(s string) any {
	if s == "" {
		return gocql.UnsetValue
	}
	return s
}

// msOrUnset is t at Cassandra's precision, unset when zero.
func msOrUnset(t time.Time) any {
	if t.IsZero() {
		return gocql.UnsetValue
	}
	return t.UTC().Truncate(time.Millisecond)
}

// SessionIP is the address a session's ip column holds for s (with or without a port), nil
// for none or one that does not parse.
func SessionIP(s string) net.IP {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	return net.ParseIP(s)
}

const sessionWriteAt = `INSERT INTO sessions (` + sessionCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ? AND TTL ?`

// AddSessionWrite adds the write of s at timestamp ts (µs) with ttl seconds to live to b.
func AddSessionWrite(b *gocql.Batch, s session.Session, ts int64, ttl int) {
	var ip any = gocql.UnsetValue
	if v := SessionIP(s.IP); v != nil {
		ip = v
	}
	data := s.Data
	if data == nil {
		data = map[string]string{}
	}
	b.Query(sessionWriteAt, s.ID, unsetIfEmpty(s.UserID), msOrUnset(s.CreatedAt), msOrUnset(s.LastActive), msOrUnset(s.ExpiresAt),
		ip, s.UserAgent, string(s.Status), data, ts, ttl)
}

// AddSessionDelete adds the delete of session id at timestamp ts (µs) to b.
func AddSessionDelete(b *gocql.Batch, id string, ts int64) {
	b.Query(`DELETE FROM sessions USING TIMESTAMP ? WHERE session_id = ?`, ts, id)
}

// SessionScan reads every session (a full, paged scan), expired ones included.
func SessionScan(ctx context.Context, s *gocql.Session, fn func(session.Session) error) error {
	scan := func(iter *gocql.Iter, row *sessionRow) bool { return iter.Scan(row.dest()...) }
	return scanAll(ctx, s, sessionCols, "sessions", scan, func(row sessionRow) error { return fn(row.session()) })
}

// CartTable is the table holding owner's carts, its partition key column and owner's key.
func CartTable(owner cart.Owner) (table, key, val string) {
	t, v := tableFor(owner)
	return t.name, t.key, v
}

// AddCartWrite adds the write of cart c (Cassandra id id) at timestamp ts (µs) with ttl
// seconds to live to b: its header row, its lines and, with active set and an active cart,
// the partition's active_cart. All on the owner's partition, so an unlogged batch of them
// is atomic without a batchlog.
func AddCartWrite(b *gocql.Batch, c cart.Cart, id gocql.UUID, ts int64, ttl int, active bool) {
	table, key, owner := CartTable(c.Owner)
	b.Query(fmt.Sprintf(`UPDATE %s USING TIMESTAMP ? AND TTL ? SET status = ?, order_id = ?, created_at = ?, updated_at = ?,
		expires_at = ?, checkout_order = ?, checkout_until = ? WHERE %s = ? AND cart_id = ? AND product_id = ''`, table, key),
		ts, ttl, string(c.Status), unsetIfEmpty(c.OrderID), msOrUnset(c.CreatedAt), msOrUnset(c.UpdatedAt), msOrUnset(c.ExpiresAt),
		unsetIfEmpty(c.CheckoutOrder), msOrUnset(c.CheckoutUntil), owner, id)
	if active && c.Status == cart.Active {
		AddActiveCart(b, c.Owner, &id, ts, ttl)
	}
	for _, it := range c.Items {
		b.Query(fmt.Sprintf(`UPDATE %s USING TIMESTAMP ? AND TTL ? SET category = ?, quantity = ?, added_at = ?
			WHERE %s = ? AND cart_id = ? AND product_id = ?`, table, key), ts, ttl, it.Category, it.Quantity, msOrUnset(it.AddedAt), owner, id, it.ProductID)
	}
}

// AddActiveCart adds the write of owner's active_cart (nil: none) at ts (µs) to b.
func AddActiveCart(b *gocql.Batch, owner cart.Owner, id *gocql.UUID, ts int64, ttl int) {
	table, key, val := CartTable(owner)
	var act any // null: no active cart
	if id != nil {
		act = *id
	}
	b.Query(fmt.Sprintf(`UPDATE %s USING TIMESTAMP ? AND TTL ? SET active_cart = ? WHERE %s = ?`, table, key), ts, ttl, act, val)
}

// AddCartDelete adds the delete of owner's cart id (every row of it) at ts (µs) to b.
func AddCartDelete(b *gocql.Batch, owner cart.Owner, id gocql.UUID, ts int64) {
	table, key, val := CartTable(owner)
	b.Query(fmt.Sprintf(`DELETE FROM %s USING TIMESTAMP ? WHERE %s = ? AND cart_id = ?`, table, key), ts, val, id)
}

// addTo applies row to c: a header row sets the cart's fields (and reports true), a line is
// appended unless it has no quantity (a line half-written by an expired TTL or a racing delete).
func (row cartRow) addTo(c *cart.Cart) (header bool) {
	if row.productID == "" {
		c.Status, c.OrderID = cart.Status(row.status), row.orderID
		c.CreatedAt, c.UpdatedAt, c.ExpiresAt = row.created, row.updated, row.expires
		c.CheckoutOrder, c.CheckoutUntil = row.checkoutOrder, row.checkoutUntil
		return true
	}
	if row.quantity > 0 {
		c.Items = append(c.Items, cart.Item{ProductID: row.productID, Category: row.category, Quantity: row.quantity, AddedAt: row.addedAt})
	}
	return false
}

// CartScan reads the carts of the guest or the user table, or with owner set only that
// owner's partition, calling fn once per cart (ID: the Cassandra timeuuid) with its lines. It
// reads at the session's default level, which clusterConfig sets to the client's quorum
// (Levels), as do ActiveCartID and SearchScan.
func CartScan(ctx context.Context, s *gocql.Session, guest bool, owner string, fn func(cart.Cart) error) error {
	t := userCarts
	if guest {
		t = guestCarts
	}
	stmt := fmt.Sprintf(`SELECT %s, %s FROM %s`, t.key, cartCols, t.name)
	var args []any
	if owner != "" {
		stmt += fmt.Sprintf(` WHERE %s = ?`, t.key)
		args = append(args, owner)
	}
	iter := s.Query(stmt, args...).WithContext(ctx).PageSize(1000).Iter()
	// Rows come partition by partition, a cart's rows together: emit a cart when the next
	// begins, as the repository reads it (its logical id, the snapshot's lines while a freeze
	// holds it, no removals), and none for a generation a give-back or merge replaced.
	var cur []cartRow
	var curOwner cart.Owner
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		rows := cur
		cur = nil
		st := stateOf(curOwner, rows[0].cartID, rows)
		if st.c.Status == superseded {
			return nil
		}
		return fn(st.c)
	}
	for {
		var key string
		var row cartRow
		if !iter.Scan(append([]any{&key}, row.dest()...)...) {
			break
		}
		if row.cartID == (gocql.UUID{}) { // a partition holding only its static column
			continue
		}
		o := cart.User(key)
		if guest {
			o = cart.Guest(key)
		}
		if len(cur) > 0 && (row.cartID != cur[0].cartID || o != curOwner) {
			if err := flush(); err != nil {
				iter.Close()
				return err
			}
		}
		cur, curOwner = append(cur, row), o
	}
	err := flush()
	if cerr := iter.Close(); cerr != nil {
		return fmt.Errorf("scan %s: %w", t.name, cerr)
	}
	return err
}

// ActiveCartID is the id of owner's active cart (nil: none), read at the session's quorum:
// its logical id, the one the repository shows, when a give-back or merge stored it anew.
func ActiveCartID(ctx context.Context, s *gocql.Session, owner cart.Owner) (*gocql.UUID, error) {
	t, val := tableFor(owner)
	var act *gocql.UUID
	err := s.Query(fmt.Sprintf(`SELECT active_cart FROM %s WHERE %s = ? LIMIT 1`, t.name, t.key), val).
		WithContext(ctx).Scan(&act)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return nil, fmt.Errorf("read %s active cart: %w", owner.Key(), err)
	}
	if act == nil || *act == (gocql.UUID{}) {
		return nil, nil
	}
	var logical *gocql.UUID
	err = s.Query(fmt.Sprintf(`SELECT logical_cart FROM %s WHERE %s = ? AND cart_id = ? AND product_id = ''`, t.name, t.key), val, *act).
		WithContext(ctx).Scan(&logical)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return nil, fmt.Errorf("read %s active cart: %w", owner.Key(), err)
	}
	if logical != nil && *logical != (gocql.UUID{}) {
		return logical, nil
	}
	return act, nil
}

// SearchRow is one row a product has in a search table: the table, the partition's category
// and the clustering value the search sorts by.
type SearchRow struct {
	Table    string
	Category string
	Sort     int64
}

func (r SearchRow) String() string { return fmt.Sprintf("%s|%s|%d", r.Table, r.Category, r.Sort) }

// searchTable is a search table: its insert, the column it sorts by and that value of a product.
type searchTable struct {
	name, insert, col string
	sort              func(p catalog.Product) int64
}

var searchTables = []searchTable{
	{"products_by_category", byCatInsert, "price", func(p catalog.Product) int64 { return int64(p.Price) }},
	{"products_by_category_newest", newestInsert, "created_at", func(p catalog.Product) int64 { return p.CreatedAt.UnixMilli() }},
}

// searchTablesOf are the search tables holding a row of p: all of them while it is active.
func searchTablesOf(p catalog.Product) []searchTable {
	if p.Inactive {
		return nil
	}
	return searchTables
}

// SearchRows are the search rows p should have (searchTablesOf).
func SearchRows(p catalog.Product) []SearchRow {
	var out []SearchRow
	for _, t := range searchTablesOf(p) {
		out = append(out, SearchRow{Table: t.name, Category: p.Category, Sort: t.sort(p)})
	}
	return out
}

// SearchScan reads every row of every search table (full, paged scans), with its product's
// id: a stale row (a product listed at an old price) is found too.
func SearchScan(ctx context.Context, s *gocql.Session, fn func(productID string, r SearchRow)) error {
	for _, t := range searchTables {
		iter := s.Query(fmt.Sprintf(`SELECT product_id, category, %s FROM %s`, t.col, t.name)).
			WithContext(ctx).PageSize(5000).Iter()
		var id, cat string
		var price int64
		var created time.Time
		dest := []any{&id, &cat, &price}
		if t.col == "created_at" {
			dest[2] = &created
		}
		for iter.Scan(dest...) {
			p := catalog.Product{Category: cat, Price: money.Amount(price), CreatedAt: created}
			fn(id, SearchRow{Table: t.name, Category: cat, Sort: t.sort(p)})
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("scan %s: %w", t.name, err)
		}
	}
	return nil
}
