package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// catalogFamily: the catalog read model, keyed by the product id, written through
// Catalog.InsertIfAbsent (see there): stock changes do not move UpdatedAt, so the backfill
// only fills products the projector has not written, below any write time the projector gives.
type catalogFamily struct{ oldRows[catalog.Product] }

var productRows = oldRows[catalog.Product]{
	table: "products", key: "id", sel: sqlitestore.ProductSelect, selKey: "p.id",
	scan:   func(rs *sql.Rows) (catalog.Product, error) { return sqlitestore.ScanProduct(rs) },
	coll:   mongoFamily{coll: mongostore.ProductsCollection, key: "_id"},
	decode: current(mongostore.DecodeProduct),
	row:    func(p *catalog.Product) Row { return Row{Key: p.ID, Product: p} },
	of:     func(r Row) *catalog.Product { return r.Product },
}

// stamp: the later of CreatedAt and UpdatedAt, the write time the read model gives a
// product's rows (InsertIfAbsent, UpsertProduct). The MongoDB source once took UpdatedAt
// alone, which differs for a product whose UpdatedAt is unset; the repository's rule is the
// one Cassandra holds.
func (catalogFamily) stamp(r *Row, _ time.Duration) {
	r.Modified = latest(r.Product.CreatedAt, r.Product.UpdatedAt)
}

func (catalogFamily) write(ctx context.Context, t *Target, r Row, _ int) error {
	_, err := cassandrastore.NewCatalog(t.s).InsertIfAbsent(ctx, *r.Product)
	return err
}

// scan reads the products with the search rows found for each, so verify sees a stale search
// row (a product listed at an old price) too.
func (catalogFamily) scan(ctx context.Context, t *Target, fn func(Row) error) error {
	search := map[string][]string{}
	err := cassandrastore.SearchScan(ctx, t.s, func(id string, r cassandrastore.SearchRow) {
		search[id] = append(search[id], r.String())
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	err = cassandrastore.ProductScan(ctx, t.s, func(p catalog.Product) error {
		return fn(Row{Key: p.ID, Product: &p, search: search[p.ID], scanned: true})
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// replace is a repair: the old store's state wins over whatever the read model holds.
func (catalogFamily) replace(ctx context.Context, t *Target, _ string, rows []Row, _, _ time.Time) error {
	for _, r := range rows {
		if err := cassandrastore.NewCatalog(t.s).UpsertProduct(ctx, *r.Product); err != nil {
			return err
		}
	}
	return nil
}

func (catalogFamily) canonical(r Row, c *canon) {
	p := r.Product
	c.field("product", p.ID, p.Name, p.Description, fmt.Sprint(!p.Inactive), p.Category, fmt.Sprint(int64(p.Price)), c.t(p.CreatedAt), c.t(p.UpdatedAt))
	c.sortedMap(p.Attributes)
	zones := make([]string, 0, len(p.Stock))
	for z, q := range p.Stock {
		zones = append(zones, fmt.Sprintf("stock:%s=%d", z, q))
	}
	sort.Strings(zones)
	c.field(zones...)
	search := r.search
	if !r.scanned {
		for _, s := range cassandrastore.SearchRows(*p) {
			search = append(search, s.String())
		}
	}
	sort.Strings(search)
	c.field("search:" + strings.Join(search, ","))
}
