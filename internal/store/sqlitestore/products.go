package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
)

type products DB

const baseColumns = `p.id, p.name, p.description, p.active, p.category, p.price, p.attributes, p.created_at, p.updated_at`

// For one product, its stock comes back as "zone=qty;zone=qty" beside the row. A search page
// instead reads the stock of all its products in one query (stockFor): per-row subqueries were
// half of a search's CPU. (Attribute and stock rows for the page in one UNION query were slower
// still: with cgo, per-row cost dominates, and that returns five times the rows.)
const productColumns = baseColumns + `,
	(SELECT coalesce(group_concat(s.zone || '=' || s.qty, ';'), '') FROM stock s WHERE s.product_id = p.id)`

type rowScanner interface{ Scan(dest ...any) error }

func scanProduct(row rowScanner) (catalog.Product, error) {
	var stock string
	p, err := scanBase(row, &stock)
	if err != nil {
		return p, err
	}
	p.Stock = map[string]int64{}
	for _, kv := range strings.Split(stock, ";") {
		zone, qty, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(qty, 10, 64)
		if err != nil {
			return p, fmt.Errorf("product %s stock %q: %w", p.ID, kv, err)
		}
		p.Stock[zone] = n
	}
	return p, nil
}

// scanBase reads baseColumns plus any extra destinations.
func scanBase(row rowScanner, extra ...any) (catalog.Product, error) {
	var p catalog.Product
	var attrs string
	var created, updated int64
	var active bool
	dest := append([]any{&p.ID, &p.Name, &p.Description, &active, &p.Category, &p.Price, &attrs, &created, &updated}, extra...)
	if err := row.Scan(dest...); err != nil {
		return p, err
	}
	p.Inactive = !active
	p.CreatedAt, p.UpdatedAt = fromNanos(created), fromNanos(updated)
	if attrs != "{}" {
		if err := json.Unmarshal([]byte(attrs), &p.Attributes); err != nil {
			return p, fmt.Errorf("product %s attributes: %w", p.ID, err)
		}
	}
	return p, nil
}

// stockFor fills the stock of a page of products with one query.
func stockFor(ctx context.Context, q queryer, ps []catalog.Product) error {
	if len(ps) == 0 {
		return nil
	}
	args := make([]any, len(ps))
	index := make(map[string]*catalog.Product, len(ps))
	for i := range ps {
		args[i] = ps[i].ID
		ps[i].Stock = map[string]int64{}
		index[ps[i].ID] = &ps[i]
	}
	rows, err := q.QueryContext(ctx, `SELECT product_id, zone, qty FROM stock WHERE product_id IN (?`+
		strings.Repeat(",?", len(ps)-1)+`)`, args...)
	if err != nil {
		return fmt.Errorf("read stock: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, zone string
		var qty int64
		if err := rows.Scan(&id, &zone, &qty); err != nil {
			return err
		}
		index[id].Stock[zone] = qty
	}
	return rows.Err()
}

func getProduct(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id string) (catalog.Product, error) {
	p, err := scanProduct(q.QueryRowContext(ctx, `SELECT `+productColumns+` FROM products p WHERE p.id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return p, catalog.ErrNotFound
	}
	return p, err
}

func (r *products) CreateProduct(ctx context.Context, p catalog.Product) (err error) {
	return (*DB)(r).scopedTx(ctx, ordersScope, func(tx *sql.Tx) error { return insertProduct(ctx, tx, p) })
}

// CreateProducts inserts every product in one transaction: the single writer commits (and
// syncs the WAL) once instead of once per product.
func (r *products) CreateProducts(ctx context.Context, ps []catalog.Product) error {
	return (*DB)(r).scopedTx(ctx, ordersScope, func(tx *sql.Tx) error {
		for _, p := range ps {
			if err := insertProduct(ctx, tx, p); err != nil {
				return fmt.Errorf("product %s: %w", p.ID, err)
			}
		}
		return nil
	})
}

// insertProduct writes a product, its stock and its outbox event inside tx.
func insertProduct(ctx context.Context, tx *sql.Tx, p catalog.Product) error {
	attrs, err := json.Marshal(nonNilMap(p.Attributes))
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO products (id, name, description, active, category, price, attributes, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		p.ID, p.Name, p.Description, !p.Inactive, p.Category, int64(p.Price), string(attrs), nanos(p.CreatedAt), nanos(p.UpdatedAt))
	if err != nil {
		return fmt.Errorf("insert product: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return catalog.ErrExists
	}
	if err := writeStock(ctx, tx, p.ID, p.Stock); err != nil {
		return err
	}
	return appendProductChanged(ctx, tx, p)
}

func writeStock(ctx context.Context, tx *sql.Tx, id string, stock map[string]int64) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM stock WHERE product_id = ?`, id); err != nil {
		return fmt.Errorf("reset stock: %w", err)
	}
	for zone, qty := range stock {
		if _, err := tx.ExecContext(ctx, `INSERT INTO stock (product_id, zone, qty) VALUES (?, ?, ?)`, id, zone, qty); err != nil {
			return fmt.Errorf("insert stock %s/%s: %w", id, zone, err)
		}
	}
	return nil
}

func appendProductChanged(ctx context.Context, tx *sql.Tx, p catalog.Product) error {
	payload, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return appendOutbox(ctx, tx, outbox.TopicProductChanged, p.ID, payload, p.UpdatedAt)
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func (r *products) UpdateProduct(ctx context.Context, id string, update func(*catalog.Product) error) (p catalog.Product, err error) {
	err = (*DB)(r).scopedTx(ctx, ordersScope, func(tx *sql.Tx) error {
		cur, err := getProduct(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := update(&cur); err != nil {
			return err
		}
		cur.ID = id
		attrs, err := json.Marshal(nonNilMap(cur.Attributes))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE products SET name = ?, description = ?, active = ?, category = ?, price = ?,
			attributes = ?, updated_at = ? WHERE id = ?`, cur.Name, cur.Description, !cur.Inactive, cur.Category, int64(cur.Price),
			string(attrs), nanos(cur.UpdatedAt), id); err != nil {
			return fmt.Errorf("update product: %w", err)
		}
		if err := writeStock(ctx, tx, id, cur.Stock); err != nil {
			return err
		}
		p = cur
		return appendProductChanged(ctx, tx, cur)
	})
	return p, err
}

func (r *products) GetProduct(ctx context.Context, id string) (p catalog.Product, err error) {
	return getProduct(ctx, r.r, id)
}

type priceCursor struct {
	Price int64  `json:"p"`
	ID    string `json:"i"`
}

func (r *products) SearchProducts(ctx context.Context, q catalog.Search) (page paging.Page[catalog.Product], err error) {
	q, err = q.Validate()
	if err != nil {
		return page, err
	}
	if q.Sort == catalog.SortNewest {
		return r.newest(ctx, q)
	}
	maxPrice := int64(money.Max)
	if q.MaxPrice > 0 {
		maxPrice = int64(q.MaxPrice)
	}
	// Give SQLite exactly one lower bound to seek the (category, price, id) index with: the
	// minimum price on the first page, the cursor after that. With both, it seeks on the
	// cursor's and scans every cheaper product before the range.
	lower, args := `p.price >= ?`, []any{q.Category, int64(q.MinPrice)}
	if q.Page.Cursor != "" {
		var after priceCursor
		if err := paging.Decode(q.Page.Cursor, &after); err != nil {
			return page, err
		}
		if after.Price >= int64(q.MinPrice) { // a cursor from below the range starts at its minimum
			lower, args = `(p.price, p.id) > (?, ?)`, []any{q.Category, after.Price, after.ID}
		}
	}
	rows, err := r.r.QueryContext(ctx, `SELECT `+baseColumns+` FROM products p
		WHERE p.category = ? AND `+lower+` AND p.price <= ? AND p.active ORDER BY p.price, p.id LIMIT ?`,
		append(args, maxPrice, q.Page.Limit+1)...)
	if err != nil {
		return page, fmt.Errorf("search products: %w", err)
	}
	return r.page(ctx, rows, q, func(last catalog.Product) any { return priceCursor{Price: int64(last.Price), ID: last.ID} })
}

// newest lists a category newest first, on the (category, created_at DESC, id DESC) index.
func (r *products) newest(ctx context.Context, q catalog.Search) (paging.Page[catalog.Product], error) {
	after, args := ``, []any{q.Category}
	if q.Page.Cursor != "" {
		pos, err := catalog.DecodeNewest(q.Page.Cursor)
		if err != nil {
			return paging.Page[catalog.Product]{}, err
		}
		after, args = ` AND (p.created_at, p.id) < (?, ?)`, append(args, pos.Created, pos.ID)
	}
	rows, err := r.r.QueryContext(ctx, `SELECT `+baseColumns+` FROM products p
		WHERE p.category = ?`+after+` AND p.active ORDER BY p.created_at DESC, p.id DESC LIMIT ?`,
		append(args, q.Page.Limit+1)...)
	if err != nil {
		return paging.Page[catalog.Product]{}, fmt.Errorf("list products newest first: %w", err)
	}
	return r.page(ctx, rows, q, catalog.NewestCursor)
}

// page reads a search's rows (limit+1 of them), then the page's stock.
func (r *products) page(ctx context.Context, rows *sql.Rows, q catalog.Search, position func(catalog.Product) any) (page paging.Page[catalog.Product], err error) {
	defer rows.Close()
	for rows.Next() {
		p, err := scanBase(rows)
		if err != nil {
			return page, err
		}
		page.Items = append(page.Items, p)
	}
	if err := rows.Err(); err != nil {
		return page, err
	}
	rows.Close() // free the connection before the stock query
	page = paging.Build(page.Items, q.Page.Limit, position)
	return page, stockFor(ctx, r.r, page.Items)
}

func (r *products) AdjustStock(ctx context.Context, ref catalog.Ref, zone string, delta int64) (level int64, err error) {
	err = (*DB)(r).scopedTx(ctx, ordersScope, func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM products WHERE id = ?`, ref.ID).Scan(&one); errors.Is(err, sql.ErrNoRows) {
			return catalog.ErrNotFound
		} else if err != nil {
			return err
		}
		if delta > 0 {
			level, err = raiseStock(ctx, tx, ref.ID, zone, delta)
		} else {
			level, err = changeStock(ctx, tx, ref.ID, zone, delta)
		}
		if err != nil {
			return err
		}
		// The product as it now is goes to the outbox, so read models and the card cache see
		// admin stock changes; UpdatedAt is unchanged, the row carries the time of the change.
		p, err := getProduct(ctx, tx, ref.ID)
		if err != nil {
			return err
		}
		payload, err := json.Marshal(p)
		if err != nil {
			return err
		}
		return appendOutbox(ctx, tx, outbox.TopicProductChanged, p.ID, payload, time.Now())
	})
	return level, err
}

// raiseStock adds delta > 0 to one zone's stock inside tx, refusing to pass catalog.MaxStock:
// the upsert's WHERE leaves a full zone unchanged and returns no row.
func raiseStock(ctx context.Context, tx *sql.Tx, productID, zone string, delta int64) (int64, error) {
	var level int64
	err := sql.ErrNoRows // a delta past the cap on its own never reaches the database
	if delta <= catalog.MaxStock {
		err = tx.QueryRowContext(ctx, `INSERT INTO stock (product_id, zone, qty) VALUES (?1, ?2, ?3)
			ON CONFLICT (product_id, zone) DO UPDATE SET qty = qty + excluded.qty WHERE qty <= ?4 - excluded.qty
			RETURNING qty`, productID, zone, delta, int64(catalog.MaxStock)).Scan(&level)
	}
	if errors.Is(err, sql.ErrNoRows) {
		var cur int64
		if err := tx.QueryRowContext(ctx, `SELECT qty FROM stock WHERE product_id = ? AND zone = ?`, productID, zone).Scan(&cur); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("read stock %s/%s: %w", productID, zone, err)
		}
		return 0, &catalog.StockCapError{ProductID: productID, Zone: zone, Delta: delta, Level: cur}
	}
	if err != nil {
		return 0, fmt.Errorf("raise stock %s/%s: %w", productID, zone, err)
	}
	return level, nil
}

// changeStock adds delta to one zone's stock inside tx, refusing to go below zero.
func changeStock(ctx context.Context, tx *sql.Tx, productID, zone string, delta int64) (int64, error) {
	var level int64
	var err error
	if delta >= 0 {
		err = tx.QueryRowContext(ctx, `INSERT INTO stock (product_id, zone, qty) VALUES (?, ?, ?)
			ON CONFLICT (product_id, zone) DO UPDATE SET qty = qty + excluded.qty RETURNING qty`,
			productID, zone, delta).Scan(&level)
	} else {
		// The guard in the WHERE clause is the no-oversell rule: the row changes only if it can.
		err = tx.QueryRowContext(ctx, `UPDATE stock SET qty = qty - ?1
			WHERE product_id = ?2 AND zone = ?3 AND qty >= ?1 RETURNING qty`, -delta, productID, zone).Scan(&level)
		if errors.Is(err, sql.ErrNoRows) {
			var avail int64
			if err := tx.QueryRowContext(ctx, `SELECT qty FROM stock WHERE product_id = ? AND zone = ?`, productID, zone).Scan(&avail); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return 0, fmt.Errorf("read stock %s/%s: %w", productID, zone, err)
			}
			return 0, &catalog.InsufficientStockError{ProductID: productID, Zone: zone, Requested: -delta, Available: avail}
		}
	}
	if err != nil {
		return 0, fmt.Errorf("change stock %s/%s: %w", productID, zone, err)
	}
	return level, nil
}
