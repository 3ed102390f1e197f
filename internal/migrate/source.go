package migrate

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	_ "github.com/mattn/go-sqlite3" // the embedded store's driver

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/session"
)

// Source reads the embedded store's file read-only, next to a running shop.
type Source struct {
	db *sql.DB
	// Retention is the events' retention, for their Expires (0: event.DefaultRetention).
	Retention time.Duration
}

// OpenSource opens the SQLite file at path read-only.
func OpenSource(ctx context.Context, path string) (*Source, error) {
	q := url.Values{"mode": {"ro"}, "_busy_timeout": {"5000"}}
	db, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("migrate: open %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate: open %s: %w", path, err)
	}
	return &Source{db: db}, nil
}

func (s *Source) Close() error { return s.db.Close() }

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// keyRange is the WHERE clause of range r on col and its arguments. An unbounded Hi gets a
// clause of its own: SQLite does not end an index range scan at `(? = ” OR col < ?)`, so
// each range read would run on to the end of the index.
func keyRange(col string, r Range) (string, []any) {
	if r.Hi == "" {
		return col + " >= ?", []any{r.Lo}
	}
	return col + " >= ? AND " + col + " < ?", []any{r.Lo, r.Hi}
}

// Read returns the rows of family f in r, ordered by key. It reads in one transaction, so a
// cart and its lines come from one snapshot.
func (s *Source) Read(ctx context.Context, f Family, r Range) ([]Row, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s range %d: %w", f, r.ID, err)
	}
	defer tx.Rollback()
	var rows []Row
	switch f {
	case Sessions:
		rows, err = readSessions(ctx, tx, r)
	case Carts:
		rows, err = readCarts(ctx, tx, r)
	case History:
		rows, err = readHistory(ctx, tx, r)
	case Events:
		rows, err = s.readEvents(ctx, tx, r)
	case Catalog:
		rows, err = readProducts(ctx, tx, r)
	default:
		err = f.valid()
	}
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s range %d: %w", f, r.ID, err)
	}
	return rows, nil
}

func readSessions(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error) {
	where, args := keyRange("id", r)
	rs, err := tx.QueryContext(ctx, `SELECT id, user_id, created_at, last_active, expires_at, ip, user_agent, status, data FROM sessions
		WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Row
	for rs.Next() {
		var s session.Session
		var created, active, expires int64
		var status, data string
		if err := rs.Scan(&s.ID, &s.UserID, &created, &active, &expires, &s.IP, &s.UserAgent, &status, &data); err != nil {
			return nil, err
		}
		s.CreatedAt, s.LastActive, s.ExpiresAt = fromNanos(created), fromNanos(active), fromNanos(expires)
		s.Status = session.Status(status)
		s.Data = map[string]string{}
		if err := json.Unmarshal([]byte(data), &s.Data); err != nil {
			return nil, fmt.Errorf("session %s data: %w", s.ID, err)
		}
		// BindUser changes user_id without touching last_active: a replay after such a change
		// ties on the timestamp, which is why the dual-write phase (not the backfill) carries it.
		out = append(out, Row{Key: s.ID, Modified: latest(s.CreatedAt, s.LastActive), Expires: s.ExpiresAt, Session: &s})
	}
	return out, rs.Err()
}

func readCarts(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error) {
	where, args := keyRange("id", r)
	rs, err := tx.QueryContext(ctx, `SELECT id, owner, status, order_id, created_at, updated_at, expires_at, checkout_order, checkout_until FROM carts
		WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	var out []Row
	byID := map[string]*cart.Cart{}
	for rs.Next() {
		c := &cart.Cart{}
		var owner, status string
		var created, updated, expires, until int64
		if err := rs.Scan(&c.ID, &owner, &status, &c.OrderID, &created, &updated, &expires, &c.CheckoutOrder, &until); err != nil {
			rs.Close()
			return nil, err
		}
		o, ok := cart.ParseOwnerKey(owner)
		if !ok {
			rs.Close()
			return nil, fmt.Errorf("cart %s: owner %q", c.ID, owner)
		}
		c.Owner, c.Status = o, cart.Status(status)
		c.CreatedAt, c.UpdatedAt, c.ExpiresAt, c.CheckoutUntil = fromNanos(created), fromNanos(updated), fromNanos(expires), fromNanos(until)
		byID[c.ID] = c
		out = append(out, Row{Key: c.ID, Expires: c.ExpiresAt, Cart: c})
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return nil, err
	}
	where, args = keyRange("cart_id", r)
	rs, err = tx.QueryContext(ctx, `SELECT cart_id, product_id, category, qty, added_at FROM cart_items
		WHERE `+where+` ORDER BY cart_id, product_id`, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	for rs.Next() {
		var id string
		var it cart.Item
		var added int64
		if err := rs.Scan(&id, &it.ProductID, &it.Category, &it.Quantity, &added); err != nil {
			return nil, err
		}
		it.AddedAt = fromNanos(added)
		if c := byID[id]; c != nil {
			c.Items = append(c.Items, it)
		}
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		c := out[i].Cart
		m := latest(c.CreatedAt, c.UpdatedAt)
		for _, it := range c.Items {
			m = latest(m, it.AddedAt)
		}
		out[i].Modified = m
	}
	return out, nil
}

// sourceTables is the table holding each family's rows in the embedded store.
var sourceTables = map[Family]string{Sessions: "sessions", Carts: "carts", History: "order_history", Events: "events", Catalog: "products"}

// Count returns the number of rows of f.
func (s *Source) Count(ctx context.Context, f Family) (int64, error) {
	if err := f.valid(); err != nil {
		return 0, err
	}
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM `+sourceTables[f]).Scan(&n); err != nil {
		return 0, fmt.Errorf("migrate: count %s: %w", f, err)
	}
	return n, nil
}

// sourceKeys is the column holding each family's row key in the embedded store.
var sourceKeys = map[Family]string{Sessions: "id", Carts: "id", History: "order_id", Events: "id", Catalog: "id"}

// Split reads every (count/n)-th key of f in key order, in one pass over the key's index.
func (s *Source) Split(ctx context.Context, f Family, n int) ([]Range, error) {
	if err := f.valid(); err != nil {
		return nil, err
	}
	total, err := s.Count(ctx, f)
	if err != nil {
		return nil, err
	}
	step := total / int64(max(n, 1))
	if n <= 1 || step == 0 {
		return SplitKeys(nil), nil
	}
	key, table := sourceKeys[f], sourceTables[f]
	q := fmt.Sprintf(`SELECT k FROM (SELECT %s AS k, row_number() OVER (ORDER BY %s) AS rn FROM %s) WHERE rn %% ? = 0 ORDER BY k LIMIT ?`, key, key, table)
	rows, err := s.db.QueryContext(ctx, q, step, n-1)
	if err != nil {
		return nil, fmt.Errorf("migrate: split %s: %w", f, err)
	}
	defer rows.Close()
	var points []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		points = append(points, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("migrate: split %s: %w", f, err)
	}
	return SplitKeys(points), nil
}

// ReadCarts reads the carts ids of owner and the owner's active cart id in one snapshot
// (the dual-write mirror).
func (s *Source) ReadCarts(ctx context.Context, owner cart.Owner, ids []string) (rows []Row, active string, err error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, "", fmt.Errorf("migrate: read %s carts: %w", owner.Key(), err)
	}
	defer tx.Rollback()
	for _, id := range ids {
		rs, err := readCarts(ctx, tx, Range{Lo: id, Hi: id + "\x00"})
		if err != nil {
			return nil, "", fmt.Errorf("migrate: read cart %s: %w", id, err)
		}
		rows = append(rows, rs...)
	}
	err = tx.QueryRowContext(ctx, `SELECT id FROM carts WHERE owner = ? AND status = 'active'`, owner.Key()).Scan(&active)
	if err != nil && err != sql.ErrNoRows {
		return nil, "", fmt.Errorf("migrate: read %s active cart: %w", owner.Key(), err)
	}
	return rows, active, nil
}
