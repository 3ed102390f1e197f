package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"time"

	_ "github.com/mattn/go-sqlite3" // the embedded store's driver

	"github.com/shardmart/shardmart/internal/cart"
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
	fam, err := codecOf(f)
	if err != nil {
		return nil, err
	}
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s range %d: %w", f, r.ID, err)
	}
	defer tx.Rollback()
	rows, err := fam.readSQLite(ctx, tx, r)
	if err != nil {
		return nil, fmt.Errorf("migrate: read %s range %d: %w", f, r.ID, err)
	}
	return stampRows(fam, rows, s.Retention), nil
}

// readSQLiteRows runs query (a SELECT without WHERE) over the key range r of col, in key
// order, decoding each row with scan.
func readSQLiteRows(ctx context.Context, tx *sql.Tx, query, col string, r Range, scan func(*sql.Rows) (Row, error)) ([]Row, error) {
	where, args := keyRange(col, r)
	rs, err := tx.QueryContext(ctx, query+` WHERE `+where+` ORDER BY `+col, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Row
	for rs.Next() {
		row, err := scan(rs)
		if err != nil {
			return nil, err
		}
		out = append(out, row)
	}
	return out, rs.Err()
}

// Count returns the number of rows of f.
func (s *Source) Count(ctx context.Context, f Family) (int64, error) {
	fam, err := codecOf(f)
	if err != nil {
		return 0, err
	}
	table, _ := fam.sqlite()
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		return 0, fmt.Errorf("migrate: count %s: %w", f, err)
	}
	return n, nil
}

// Split reads every (count/n)-th key of f in key order, in one pass over the key's index.
func (s *Source) Split(ctx context.Context, f Family, n int) ([]Range, error) {
	fam, err := codecOf(f)
	if err != nil {
		return nil, err
	}
	step, err := splitStep(ctx, s, f, n)
	if err != nil {
		return nil, err
	}
	if step == 0 {
		return SplitKeys(nil), nil
	}
	table, key := fam.sqlite()
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
	carts := registry[Carts]
	for _, id := range ids {
		rs, err := carts.readSQLite(ctx, tx, keyOnly(id))
		if err != nil {
			return nil, "", fmt.Errorf("migrate: read cart %s: %w", id, err)
		}
		rows = append(rows, stampRows(carts, rs, s.Retention)...)
	}
	err = tx.QueryRowContext(ctx, `SELECT id FROM carts WHERE owner = ? AND status = 'active'`, owner.Key()).Scan(&active)
	if err != nil && err != sql.ErrNoRows {
		return nil, "", fmt.Errorf("migrate: read %s active cart: %w", owner.Key(), err)
	}
	return rows, active, nil
}
