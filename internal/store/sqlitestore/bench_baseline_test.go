package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

// Baselines: each repository operation against the same SQL issued raw through database/sql on
// the same pools (so the same per-connection statement cache), with no domain types, no JSON
// decoding and no cursor encoding on the raw side. Both run in the same benchmark, alternating
// in blocks (storetest.BenchBlocks), and the overhead metric is repository cost / raw cost.
// Numbers and the reasoning: docs/evidence/benchmarks.md, "Baselines".
//
//	go test ./internal/store/sqlitestore -run '^$' -bench Baseline -benchtime 20000x -count 3

const baselineBlocks = 8

// rawLine is what the raw side knows of an order line: ids and quantity, nothing priced.
type rawLine struct {
	productID, category string
	qty                 int64
}

// rawPlace is Place's transaction written by hand: the same statements in the same order
// (idempotency check, cart check, per line the price read and the guarded decrement, the order
// insert, the outbox append), JSON built by appending bytes instead of encoding/json.
func rawPlace(ctx context.Context, w *sql.DB, id, user, cartID, zone, key string, at time.Time, lines []rawLine) (err error) {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	var s1, s2, s3, s4, s5, s6, s7 string
	var n1, n2, n3 int64
	err = tx.QueryRowContext(ctx, `SELECT `+orderColumns+` FROM orders WHERE user_id = ? AND idem_key = ?`, user, key).
		Scan(&s1, &s2, &s3, &s4, &s5, &s6, &n1, &s7, &n2, &n3)
	if err == nil {
		return tx.Commit() // an existing order: nothing to write
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	var taken int
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM orders WHERE cart_id = ?) + (SELECT count(*) FROM cart_fences WHERE cart_id = ?)`,
		cartID, cartID).Scan(&taken); err != nil {
		return err
	}
	if taken > 0 {
		return fmt.Errorf("cart %s already ordered", cartID)
	}
	items := make([]byte, 0, 128*len(lines))
	items = append(items, '[')
	var total int64
	for i, l := range lines {
		var name, category string
		var price, level int64
		if err := tx.QueryRowContext(ctx, `SELECT name, category, price FROM products WHERE id = ?`, l.productID).
			Scan(&name, &category, &price); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `UPDATE stock SET qty = qty - ?1
			WHERE product_id = ?2 AND zone = ?3 AND qty >= ?1 RETURNING qty`, l.qty, l.productID, zone).Scan(&level); err != nil {
			return fmt.Errorf("stock %s/%s: %w", l.productID, zone, err)
		}
		total += price * l.qty
		if i > 0 {
			items = append(items, ',')
		}
		items = append(items, `{"product_id":"`...)
		items = append(items, l.productID...)
		items = append(items, `","category":"`...)
		items = append(items, l.category...)
		items = append(items, `","name":"`...)
		items = append(items, name...)
		items = append(items, `","quantity":`...)
		items = strconv.AppendInt(items, l.qty, 10)
		items = append(items, `,"unit_price":`...)
		items = appendCents(items, price)
		items = append(items, '}')
	}
	items = append(items, ']')
	if _, err := tx.ExecContext(ctx, `INSERT INTO orders (`+orderColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		id, user, cartID, zone, key, "created", total, string(items), at.UnixNano(), at.UnixNano()); err != nil {
		return err
	}
	payload := make([]byte, 0, len(items)+256)
	payload = append(payload, `{"id":"`...)
	payload = append(payload, id...)
	payload = append(payload, `","user_id":"`...)
	payload = append(payload, user...)
	payload = append(payload, `","cart_id":"`...)
	payload = append(payload, cartID...)
	payload = append(payload, `","zone":"`...)
	payload = append(payload, zone...)
	payload = append(payload, `","items":`...)
	payload = append(payload, items...)
	payload = append(payload, `,"total":`...)
	payload = appendCents(payload, total)
	payload = append(payload, `,"status":"created","idempotency_key":"`...)
	payload = append(payload, key...)
	payload = append(payload, `","created_at":"`...)
	payload = at.AppendFormat(payload, time.RFC3339Nano)
	payload = append(payload, `","updated_at":"`...)
	payload = at.AppendFormat(payload, time.RFC3339Nano)
	payload = append(payload, `"}`...)
	if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (topic, key, payload, created_at) VALUES (?, ?, ?, ?)`,
		outbox.TopicOrderPlaced, id, payload, at.UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

// appendCents writes non-negative cents as a JSON money string ("12.34").
func appendCents(b []byte, c int64) []byte {
	b = append(b, '"')
	b = strconv.AppendInt(b, c/100, 10)
	b = append(b, '.', byte('0'+c%100/10), byte('0'+c%10), '"')
	return b
}

// rawSearch is SearchProducts' two queries (the page by the (category, price, id) index, then
// the page's stock in one IN query) scanned into plain variables: no attribute JSON decoding,
// no products, no cursor.
func rawSearch(ctx context.Context, r *sql.DB, category string, minPrice, maxPrice int64, limit int) (int, error) {
	rows, err := r.QueryContext(ctx, `SELECT `+baseColumns+` FROM products p
		WHERE p.category = ? AND p.price >= ? AND p.price <= ? AND p.active ORDER BY p.price, p.id LIMIT ?`,
		category, minPrice, maxPrice, limit+1)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	ids := make([]any, 0, limit+1)
	var id, name, desc, cat, attrs string
	var active bool
	var price, created, updated int64
	for rows.Next() {
		if err := rows.Scan(&id, &name, &desc, &active, &cat, &price, &attrs, &created, &updated); err != nil {
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	rows.Close()
	if len(ids) > limit {
		ids = ids[:limit]
	}
	if len(ids) == 0 {
		return 0, nil
	}
	srows, err := r.QueryContext(ctx, `SELECT product_id, zone, qty FROM stock WHERE product_id IN (?`+
		strings.Repeat(",?", len(ids)-1)+`)`, ids...)
	if err != nil {
		return 0, err
	}
	defer srows.Close()
	var zone string
	var qty int64
	for srows.Next() {
		if err := srows.Scan(&id, &zone, &qty); err != nil {
			return 0, err
		}
	}
	return len(ids), srows.Err()
}

func orderLines(ps []catalog.Product, k int64) []order.Line {
	lines := make([]order.Line, 3)
	for j := range lines {
		p := ps[(int(k%int64(len(ps)))*7+j*1013)%len(ps)]
		lines[j] = order.Line{ProductID: p.ID, Category: p.Category, Quantity: 1}
	}
	return lines
}

func rawLines(ls []order.Line) []rawLine {
	out := make([]rawLine, len(ls))
	for i, l := range ls {
		out[i] = rawLine{productID: l.ProductID, category: l.Category, qty: l.Quantity}
	}
	return out
}

// BenchmarkBaselineOrders: Place with 3 items against rawPlace, from 1 caller (each side's
// transaction time: the single writer's capacity) and from 16 (what concurrent callers get).
func BenchmarkBaselineOrders(b *testing.B) {
	db, ps := benchDB(b, defaultDriver)
	repo := db.Orders()
	for _, workers := range []int{1, 16} {
		b.Run(fmt.Sprintf("3-items/callers=%d", workers), func(b *testing.B) {
			run := time.Now().UnixNano() // fresh ids on every call (b.N ramp-up, -count)
			storetest.BenchBlocks(b, workers, baselineBlocks, func(ctx context.Context, k int64) error {
				_, _, err := repo.Place(ctx, order.Placement{OrderID: fmt.Sprintf("o%d-r%d", run, k), UserID: fmt.Sprintf("u%d", k%1000),
					CartID: fmt.Sprintf("c%d-r%d", run, k), Zone: "eu", IdempotencyKey: fmt.Sprintf("k%d-r%d", run, k),
					Lines: orderLines(ps, k), At: time.Now().UTC()})
				return err
			}, func(ctx context.Context, k int64) error {
				return rawPlace(ctx, db.w, fmt.Sprintf("o%d-d%d", run, k), fmt.Sprintf("u%d", k%1000), fmt.Sprintf("c%d-d%d", run, k),
					"eu", fmt.Sprintf("k%d-d%d", run, k), time.Now().UTC(), rawLines(orderLines(ps, k)))
			}, func(_ int, i int64) int64 { return i })
		})
	}
}

// BenchmarkBaselineSearch: SearchProducts (category, 100.00–600.00, 20 per page) against
// rawSearch, from 16 callers, the same 20 categories in the same order on both sides.
func BenchmarkBaselineSearch(b *testing.B) {
	db, _ := benchDB(b, defaultDriver)
	repo := db.Products()
	lo, hi := money.MustParse("100.00"), money.MustParse("600.00")
	b.Run("category-price/callers=16", func(b *testing.B) {
		storetest.BenchBlocks(b, 16, baselineBlocks, func(ctx context.Context, k int64) error {
			page, err := repo.SearchProducts(ctx, catalog.Search{Category: fmt.Sprintf("cat%02d", k%benchCategories),
				MinPrice: lo, MaxPrice: hi, Page: paging.Request{Limit: 20}})
			if err == nil && len(page.Items) == 0 {
				err = errors.New("empty page")
			}
			return err
		}, func(ctx context.Context, k int64) error {
			n, err := rawSearch(ctx, db.r, fmt.Sprintf("cat%02d", k%benchCategories), int64(lo), int64(hi), 20)
			if err == nil && n == 0 {
				err = errors.New("empty page")
			}
			return err
		}, func(_ int, i int64) int64 { return i })
	})
}

// TestRawBaselinesMatchTheRepository: the raw sides write and read what the repository does,
// so the baselines compare like with like.
func TestRawBaselinesMatchTheRepository(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir()+"/raw.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ps []catalog.Product
	for i := range 40 {
		p := catalog.Product{ID: fmt.Sprintf("p%02d", i), Name: "Bench product", Category: fmt.Sprintf("cat%d", i%2),
			Price: money.Amount(105 + 1000*i), Attributes: map[string]string{"color": "red"}, Stock: map[string]int64{"eu": 10, "us": 3}}
		if err := db.Products().CreateProduct(ctx, p); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	at := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	lines := orderLines(ps, 3)
	if _, _, err := db.Orders().Place(ctx, order.Placement{OrderID: "o1", UserID: "u1", CartID: "c1", Zone: "eu", IdempotencyKey: "k1",
		Lines: lines, At: at}); err != nil {
		t.Fatal(err)
	}
	if err := rawPlace(ctx, db.w, "o2", "u1", "c2", "eu", "k2", at, rawLines(lines)); err != nil {
		t.Fatal(err)
	}
	row := func(q string, args ...any) []string {
		var a, b, c string
		if err := db.r.QueryRowContext(ctx, q, args...).Scan(&a, &b, &c); err != nil {
			t.Fatal(err)
		}
		return []string{a, b, c}
	}
	same := func(what string, x, y []string) {
		for i := range x {
			if x[i] != y[i] {
				t.Errorf("%s differs:\nrepository %s\nraw        %s", what, x[i], y[i])
			}
		}
	}
	const orderRow = `SELECT items, total || ' ' || status || ' ' || created_at || ' ' || updated_at, zone FROM orders WHERE id = ?`
	same("order row", row(orderRow, "o1"), row(orderRow, "o2"))
	const outboxRow = `SELECT topic, CAST(payload AS TEXT), created_at FROM outbox WHERE key = ?`
	rep := row(outboxRow, "o1")
	rep[1] = strings.NewReplacer(`"o1"`, `"o2"`, `"c1"`, `"c2"`, `"k1"`, `"k2"`).Replace(rep[1])
	same("outbox row", rep, row(outboxRow, "o2"))
	var qty int64
	if err := db.r.QueryRowContext(ctx, `SELECT qty FROM stock WHERE product_id = ? AND zone = 'eu'`, lines[0].ProductID).Scan(&qty); err != nil || qty != 8 {
		t.Errorf("stock after two orders: %d, %v; want 8", qty, err)
	}

	page, err := db.Products().SearchProducts(ctx, catalog.Search{Category: "cat0", MinPrice: 1000, MaxPrice: 30000, Page: paging.Request{Limit: 5}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := rawSearch(ctx, db.r, "cat0", 1000, 30000, 5)
	if err != nil || n != len(page.Items) || n != 5 {
		t.Errorf("raw search: %d rows, %v; repository %d", n, err, len(page.Items))
	}
}
