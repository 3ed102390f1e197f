package migrate

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// History, events and the catalog: rows the old store keeps whole (an order's history entry,
// an event, a product), written into Cassandra through the shop's own repositories, whose
// write paths already order concurrent writers:
//
//   - history: UpsertEntry writes at the entry's UpdatedAt, and every status change moves it,
//     so the dual write's newer entry always beats a backfilled older one;
//   - events never change: the same event written twice is one row, with its TTL from the
//     event's time (retention);
//   - catalog: Catalog.InsertIfAbsent (see there): stock changes do not move UpdatedAt, so the
//     backfill only fills products the projector has not written.

// keyRange is the WHERE clause on col of range r, and its arguments. An unbounded Hi gets
// its own clause: SQLite does not end an index range at `(? = ” OR col < ?)` (bounds), so
// with a secondary index every range read scanned the index to its end.
func keyRange(col string, r Range) (string, []any) {
	if r.Hi == "" {
		return col + " >= ?", []any{r.Lo}
	}
	return col + " >= ? AND " + col + " < ?", []any{r.Lo, r.Hi}
}

func readHistory(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error) {
	where, args := keyRange("order_id", r)
	rs, err := tx.QueryContext(ctx, `SELECT user_id, placed_at, order_id, updated_at, status, zone, total, items FROM order_history
		WHERE `+where+` ORDER BY order_id`, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Row
	for rs.Next() {
		var e history.Entry
		var placed, updated int64
		var items string
		if err := rs.Scan(&e.UserID, &placed, &e.OrderID, &updated, &e.Status, &e.Zone, &e.Total, &items); err != nil {
			return nil, err
		}
		e.PlacedAt, e.UpdatedAt = fromNanos(placed), fromNanos(updated)
		if err := json.Unmarshal([]byte(items), &e.Items); err != nil {
			return nil, fmt.Errorf("history %s items: %w", e.OrderID, err)
		}
		out = append(out, Row{Key: e.OrderID, Modified: latest(e.PlacedAt, e.UpdatedAt), Entry: &e})
	}
	return out, rs.Err()
}

func (s *Source) readEvents(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error) {
	where, args := keyRange("id", r)
	rs, err := tx.QueryContext(ctx, `SELECT actor, at, id, type, product_id, details FROM events
		WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Row
	for rs.Next() {
		var e event.Event
		var at int64
		var details string
		if err := rs.Scan(&e.Actor, &at, &e.ID, &e.Type, &e.ProductID, &details); err != nil {
			return nil, err
		}
		e.At = fromNanos(at)
		if err := json.Unmarshal([]byte(details), &e.Details); err != nil {
			return nil, fmt.Errorf("event %s details: %w", e.ID, err)
		}
		out = append(out, Row{Key: e.ID, Modified: e.At, Expires: event.Expiry(e.At, s.Retention), Event: &e})
	}
	return out, rs.Err()
}

func readProducts(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error) {
	rs, err := tx.QueryContext(ctx, sqlitestore.ProductRangeQuery, r.Lo, r.Hi, r.Hi)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Row
	for rs.Next() {
		p, err := sqlitestore.ScanProduct(rs)
		if err != nil {
			return nil, err
		}
		out = append(out, Row{Key: p.ID, Modified: latest(p.CreatedAt, p.UpdatedAt), Product: &p})
	}
	return out, rs.Err()
}

// writeWhole writes a history, event or catalog row through the shop's repository.
func (t *Target) writeWhole(ctx context.Context, f Family, r Row) error {
	switch {
	case f == History && r.Entry != nil:
		return cassandrastore.NewHistory(t.s).UpsertEntry(ctx, *r.Entry)
	case f == Events && r.Event != nil:
		return cassandrastore.NewEvents(t.s, t.Retention).AppendEvent(ctx, *r.Event)
	case f == Catalog && r.Product != nil:
		_, err := cassandrastore.NewCatalog(t.s).InsertIfAbsent(ctx, *r.Product)
		return err
	}
	return fmt.Errorf("row %s is not a %s row", r.Key, f)
}

type orderLine struct {
	ProductID string `cql:"product_id"`
	Category  string `cql:"category"`
	Name      string `cql:"name"`
	Quantity  int64  `cql:"quantity"`
	UnitPrice int64  `cql:"unit_price"`
}

func (t *Target) scanHistory(ctx context.Context, fn func(Row) error) error {
	iter := t.s.Query(`SELECT user_id, placed_at, order_id, status, zone, total, updated_at, items FROM order_history`).
		WithContext(ctx).Consistency(gocql.Quorum).PageSize(1000).Iter()
	for {
		var e history.Entry
		var status string
		var total int64
		var lines []orderLine
		if !iter.Scan(&e.UserID, &e.PlacedAt, &e.OrderID, &status, &e.Zone, &total, &e.UpdatedAt, &lines) {
			break
		}
		e.Status, e.Total = order.Status(status), money.Amount(total)
		for _, l := range lines {
			e.Items = append(e.Items, order.Item{ProductID: l.ProductID, Category: l.Category, Name: l.Name, Quantity: l.Quantity, UnitPrice: money.Amount(l.UnitPrice)})
		}
		if err := fn(Row{Key: e.OrderID, Entry: &e}); err != nil {
			iter.Close()
			return err
		}
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("migrate: scan history: %w", err)
	}
	return nil
}

func (t *Target) scanEvents(ctx context.Context, fn func(Row) error) error {
	iter := t.s.Query(`SELECT actor, at, event_id, type, product_id, details FROM user_events`).
		WithContext(ctx).Consistency(gocql.Quorum).PageSize(1000).Iter()
	for {
		var e event.Event
		var typ string
		if !iter.Scan(&e.Actor, &e.At, &e.ID, &typ, &e.ProductID, &e.Details) {
			break
		}
		e.Type = event.Type(typ)
		if err := fn(Row{Key: e.ID, Expires: event.Expiry(e.At, t.Retention), Event: &e}); err != nil {
			iter.Close()
			return err
		}
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("migrate: scan events: %w", err)
	}
	return nil
}

// scanCatalog reads the products table, and the search rows of each product from both
// search tables, so verify sees a stale search row (a product listed at an old price) too.
func (t *Target) scanCatalog(ctx context.Context, fn func(Row) error) error {
	search := map[string][]string{}
	iter := t.s.Query(`SELECT product_id, category, price FROM products_by_category`).
		WithContext(ctx).Consistency(gocql.Quorum).PageSize(5000).Iter()
	var id, cat string
	var price int64
	for iter.Scan(&id, &cat, &price) {
		search[id] = append(search[id], searchEntry("products_by_category", cat, price))
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("migrate: scan products_by_category: %w", err)
	}
	iter = t.s.Query(`SELECT product_id, category, created_at FROM products_by_category_newest`).
		WithContext(ctx).Consistency(gocql.Quorum).PageSize(5000).Iter()
	var created time.Time
	for iter.Scan(&id, &cat, &created) {
		search[id] = append(search[id], searchEntry("products_by_category_newest", cat, created.UnixMilli()))
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("migrate: scan products_by_category_newest: %w", err)
	}
	iter = t.s.Query(`SELECT product_id, name, description, active, category, price, attributes, stock, created_at, updated_at FROM products`).
		WithContext(ctx).Consistency(gocql.Quorum).PageSize(1000).Iter()
	for {
		var p catalog.Product
		var active *bool
		var price int64
		if !iter.Scan(&p.ID, &p.Name, &p.Description, &active, &p.Category, &price, &p.Attributes, &p.Stock, &p.CreatedAt, &p.UpdatedAt) {
			break
		}
		p.Price, p.Inactive = money.Amount(price), active != nil && !*active
		if err := fn(Row{Key: p.ID, Product: &p, search: search[p.ID], scanned: true}); err != nil {
			iter.Close()
			return err
		}
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("migrate: scan products: %w", err)
	}
	return nil
}

// searchEntry names one search row of a product: its table, category and sort value.
func searchEntry(table, category string, v int64) string {
	return fmt.Sprintf("%s|%s|%d", table, category, v)
}

// searchRows are the search rows a product should have: one per search table while active.
func searchRows(p *catalog.Product) []string {
	if p.Inactive {
		return nil
	}
	return []string{searchEntry("products_by_category", p.Category, int64(p.Price)),
		searchEntry("products_by_category_newest", p.Category, p.CreatedAt.UnixMilli())}
}

// canonicalWhole is Canonical for history, event and catalog rows.
func canonicalWhole(r Row, field func(string), t func(time.Time) string) {
	sortedMap := func(m map[string]string) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			field(k + "=" + m[k])
		}
	}
	switch {
	case r.Entry != nil:
		e := r.Entry
		for _, v := range []string{"history", e.OrderID, e.UserID, t(e.PlacedAt), t(e.UpdatedAt), string(e.Status), e.Zone, fmt.Sprint(int64(e.Total))} {
			field(v)
		}
		for _, it := range e.Items { // the order's lines keep their order
			field(fmt.Sprintf("%s|%s|%s|%d|%d", it.ProductID, it.Category, it.Name, it.Quantity, int64(it.UnitPrice)))
		}
	case r.Event != nil:
		e := r.Event
		for _, v := range []string{"event", e.ID, e.Actor, string(e.Type), t(e.At), e.ProductID} {
			field(v)
		}
		sortedMap(e.Details)
	case r.Product != nil:
		p := r.Product
		for _, v := range []string{"product", p.ID, p.Name, p.Description, fmt.Sprint(!p.Inactive), p.Category, fmt.Sprint(int64(p.Price)), t(p.CreatedAt), t(p.UpdatedAt)} {
			field(v)
		}
		sortedMap(p.Attributes)
		zones := make([]string, 0, len(p.Stock))
		for z, q := range p.Stock {
			zones = append(zones, fmt.Sprintf("stock:%s=%d", z, q))
		}
		sort.Strings(zones)
		for _, z := range zones {
			field(z)
		}
		search := r.search
		if !r.scanned {
			search = searchRows(p)
		}
		sort.Strings(search)
		field("search:" + strings.Join(search, ","))
	}
}
