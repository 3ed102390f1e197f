package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
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

func readHistory(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error) {
	where, args := keyRange("order_id", r)
	rs, err := tx.QueryContext(ctx, sqlitestore.HistorySelect+` WHERE `+where+` ORDER BY order_id`, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Row
	for rs.Next() {
		e, err := sqlitestore.ScanHistoryEntry(rs)
		if err != nil {
			return nil, err
		}
		out = append(out, Row{Key: e.OrderID, Modified: latest(e.PlacedAt, e.UpdatedAt), Entry: &e})
	}
	return out, rs.Err()
}

func (s *Source) readEvents(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error) {
	where, args := keyRange("id", r)
	rs, err := tx.QueryContext(ctx, sqlitestore.EventSelect+` WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []Row
	for rs.Next() {
		e, err := sqlitestore.ScanEvent(rs)
		if err != nil {
			return nil, err
		}
		out = append(out, Row{Key: e.ID, Modified: e.At, Expires: event.Expiry(e.At, s.Retention), Event: &e})
	}
	return out, rs.Err()
}

func readProducts(ctx context.Context, tx *sql.Tx, r Range) ([]Row, error) {
	where, args := keyRange("p.id", r)
	rs, err := tx.QueryContext(ctx, sqlitestore.ProductSelect+` WHERE `+where+` ORDER BY p.id`, args...)
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

func (t *Target) scanHistory(ctx context.Context, fn func(Row) error) error {
	return cassandrastore.HistoryScan(ctx, t.s, func(e history.Entry) error { return fn(Row{Key: e.OrderID, Entry: &e}) })
}

func (t *Target) scanEvents(ctx context.Context, fn func(Row) error) error {
	return cassandrastore.EventScan(ctx, t.s, func(e event.Event) error {
		return fn(Row{Key: e.ID, Expires: event.Expiry(e.At, t.Retention), Event: &e})
	})
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
