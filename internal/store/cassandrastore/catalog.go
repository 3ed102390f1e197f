package cassandrastore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/paging"
)

// Catalog is the catalog read model (CAT-1): products for the product page (PRD-3) and
// products_by_category for search by category and price range (PRD-2). The projector feeds
// it from the outbox (UpsertProduct, projection.CatalogSink); placement serves reads from it
// (placement.CatalogReader).
type Catalog Store

// CategoryBuckets splits a category over this many partitions (hash of the product id), so
// a large category is neither one hot partition nor an unbounded one.
const CategoryBuckets = 8

const (
	productCols    = `product_id, name, description, active, category, price, attributes, stock, created_at, updated_at`
	productSelect  = `SELECT ` + productCols + ` FROM products WHERE product_id = ?`
	productVersion = `SELECT category, price, created_at, active, updated_at, WRITETIME(price) FROM products WHERE product_id = ?`
	productInsert  = `INSERT INTO products (` + productCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`
	byCatInsert    = `INSERT INTO products_by_category (bucket, ` + productCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`
	byCatDelete    = `DELETE FROM products_by_category USING TIMESTAMP ? WHERE category = ? AND bucket = ? AND price = ? AND product_id = ?`
	newestInsert   = `INSERT INTO products_by_category_newest (bucket, ` + productCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`
	newestDelete   = `DELETE FROM products_by_category_newest USING TIMESTAMP ? WHERE category = ? AND bucket = ? AND created_at = ? AND product_id = ?`
	// (price, product_id) > cursor resumes after the last product shown; (price) <= max
	// bounds the range: both multi-column, since CQL cannot mix the two forms.
	byCatSearch = `SELECT ` + productCols + ` FROM products_by_category
		WHERE category = ? AND bucket = ? AND (price, product_id) > (?, ?) AND (price) <= (?) LIMIT ?`
	newestFirst = `SELECT ` + productCols + ` FROM products_by_category_newest WHERE category = ? AND bucket = ? LIMIT ?`
	newestAfter = `SELECT ` + productCols + ` FROM products_by_category_newest
		WHERE category = ? AND bucket = ? AND (created_at, product_id) < (?, ?) LIMIT ?`
)

func bucketOfProduct(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % CategoryBuckets)
}

// UpsertProduct writes the product row and its search rows as single-partition upserts and
// deletes at one write time, each through the client policy. Not a logged batch: its batch log
// is written to two other nodes and waits for both, so on a 3-node cluster every batch stalled
// for the write timeout while one node was frozen and not yet convicted (every checkout's
// drain with it). The order of the writes keeps the search tables free of rows no product row
// names, whatever fails: when a search key changes (category, price, creation time, on sale),
// the old rows are deleted first, then the product row is written, then the new rows; a
// failure anywhere is repaired by the outbox's retry, which reads the product row again (it
// names the old keys until it is rewritten) and repeats the steps. A search may miss the product
// for the moment between the delete and the new row, as it could miss one half of a batch.
// When no key changes, every row is written at once. The outbox makes the whole read model
// eventually consistent with the store of record (CQRS). A version older than the stored one
// (a replay) is skipped; the rows are written at projectorWriteTime (see there), so a product's
// later refresh always wins over its earlier ones and over the migration's backfill.
func (c *Catalog) UpsertProduct(ctx context.Context, p catalog.Product) error {
	var (
		old                catalog.Product
		oldPrice, oldWrite int64
		oldActive          *bool
		exists             bool
	)
	// Not cancelled with the caller: a projector's drain cut by its deadline is applied again
	// by the next one, and a batch still in flight from the first would race that one's, both
	// computed from the same stored write time; at equal timestamps Cassandra keeps the larger
	// cell, an older stock. Bounded by the store's own limit instead.
	ctx, cancel := bounded(context.WithoutCancel(ctx))
	defer cancel()
	iter := c.p.idempotent(ctx, c.s.Query(productVersion, p.ID).Consistency(c.p.levels().Catalog)).Iter()
	exists = iter.Scan(&old.Category, &oldPrice, &old.CreatedAt, &oldActive, &old.UpdatedAt, &oldWrite)
	if err := iter.Close(); err != nil {
		return fmt.Errorf("read product %s: %w", p.ID, err)
	}
	old.Price, old.Inactive = money.Amount(oldPrice), oldActive != nil && !*oldActive
	if exists && p.UpdatedAt.Before(old.UpdatedAt) {
		return nil // an older version replayed after a newer one
	}
	at := p.UpdatedAt
	if at.Before(p.CreatedAt) {
		at = p.CreatedAt
	}
	readAt, provisional := catalog.ReadAt(ctx)
	wt := max(writeTime(at), oldWrite+1, projectorWriteTime())
	if provisional {
		// An order's request copying the stock it took: at the time it read the store of
		// record, so it loses to every copy that read later, and to the projector's, which
		// writes at its own later time; only a copy that read after them wins, and it read a
		// state at least as new. Its read may be older than another request's that started
		// before it, which the projector's copy of that newer change, later, overwrites.
		wt = max(writeTime(at), readAt.UTC().UnixMicro())
	}
	attrs, stock := p.Attributes, p.Stock
	if attrs == nil {
		attrs = map[string]string{}
	}
	if stock == nil {
		stock = map[string]int64{}
	}
	bucket := bucketOfProduct(p.ID)
	var deletes, inserts []*gocql.Query
	q := func(stmt string, args ...any) *gocql.Query {
		return c.p.idempotent(ctx, c.s.Query(stmt, args...).Consistency(c.p.levels().Catalog))
	}
	// Search rows exist for active products only; a row under an old key is deleted.
	if exists && !old.Inactive && (p.Inactive || old.Category != p.Category || old.Price != p.Price) {
		deletes = append(deletes, q(byCatDelete, wt, old.Category, bucket, int64(old.Price), p.ID))
	}
	// created_at is compared as stored (ms): the embedded store and the outbox carry it in ns,
	// and reading that as a new created_at would delete and rewrite the same newest-first row
	// at one timestamp, where the delete wins.
	if exists && !old.Inactive && (p.Inactive || old.Category != p.Category || !old.CreatedAt.Equal(p.CreatedAt.Truncate(time.Millisecond))) {
		deletes = append(deletes, q(newestDelete, wt, old.Category, bucket, ts(old.CreatedAt), p.ID))
	}
	cols := []any{p.ID, p.Name, p.Description, !p.Inactive, p.Category, int64(p.Price), attrs, stock, ts(p.CreatedAt), ts(p.UpdatedAt)}
	row := q(productInsert, append(cols, wt)...)
	for _, t := range searchTablesOf(p) {
		inserts = append(inserts, q(t.insert, append(append([]any{bucket}, cols...), wt)...))
	}
	sameKeys := exists && !old.Inactive && !p.Inactive && old.Category == p.Category && old.Price == p.Price &&
		old.CreatedAt.Equal(p.CreatedAt.Truncate(time.Millisecond))
	steps := [][]*gocql.Query{append([]*gocql.Query{row}, inserts...)}
	switch {
	case provisional && !exists:
		// A product the projector has not copied yet (created a moment ago, its message not
		// drained): the request that ordered it promised its page, so the product row is
		// written, at the version's own time, below every projector copy, which always wins
		// over it. No search rows: the projector writes them with its own row, so no row of
		// this older read can stay under a key that the product row no longer names.
		steps = [][]*gocql.Query{{q(productInsert, append(cols, writeTime(at))...)}}
	case provisional && !sameKeys:
		// Moving search rows is the projector's: a provisional copy from an older read could
		// leave a row under a key that no product row names.
		return nil
	case !sameKeys:
		// New keys: their rows only once the product row names them, old ones gone first.
		steps = [][]*gocql.Query{deletes, {row}, inserts}
	}
	for _, step := range steps {
		if err := execAll(step); err != nil {
			return fmt.Errorf("upsert product %s: %w", p.ID, err)
		}
	}
	return nil
}

// execAll runs independent statements at once and returns the first error.
func execAll(qs []*gocql.Query) error {
	errs := make([]error, len(qs))
	var wg sync.WaitGroup
	for i, q := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = q.Exec()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// lastProjectorWrite is the last write time projectorWriteTime issued in this process.
var lastProjectorWrite atomic.Int64

// projectorWriteTime is the write time of a catalog upsert: the current time in µs, and above
// every one issued before in this process, so it never repeats or goes back with the clock.
//
// UpdatedAt is no version: an order's stock change does not move it, so two states of one
// product may share it, and at equal write times Cassandra keeps the larger cell (an older,
// higher stock). Nor is the stored write time: a read that does not see the latest write (a
// backfill's, or a refresh's still in flight) gives an older one. The order the projector
// applies a product's changes in is: its refreshes are serialised per product, each writes the
// store of record's state as read then, and every change after that read has its own outbox
// message, refreshed later. So a refresh that wrote an older state later than a newer one
// (a message drained late, a drain cut and applied again) is always followed by the refresh
// of the newer change, with a later write time, and the product ends at its latest state.
// The migration's backfill writes below every such time (Catalog.InsertIfAbsent).
func projectorWriteTime() int64 {
	for {
		last := lastProjectorWrite.Load()
		wt := max(time.Now().UnixMicro(), last+1)
		if lastProjectorWrite.CompareAndSwap(last, wt) {
			return wt
		}
	}
}

func scanProduct(iter *gocql.Iter, p *catalog.Product) bool {
	var price int64
	var active *bool // null in rows written before the flag: active
	ok := iter.Scan(&p.ID, &p.Name, &p.Description, &active, &p.Category, &price, &p.Attributes, &p.Stock, &p.CreatedAt, &p.UpdatedAt)
	p.Price, p.Inactive = money.Amount(price), active != nil && !*active
	return ok
}

func (c *Catalog) GetProduct(ctx context.Context, id string) (catalog.Product, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	var p catalog.Product
	iter := c.p.idempotent(ctx, c.s.Query(productSelect, id).Consistency(c.p.levels().Catalog)).Iter()
	found := scanProduct(iter, &p)
	if err := iter.Close(); err != nil {
		return p, fmt.Errorf("read product %s: %w", id, err)
	}
	if !found {
		return catalog.Product{}, catalog.ErrNotFound
	}
	return p, nil
}

// priceCursor is the keyset position after the last product shown. Search merges the
// category's buckets, so one driver paging state cannot describe where it stopped; the
// (price, id) of the last product can, and it resumes every bucket exactly.
type priceCursor struct {
	Price int64  `json:"p"`
	ID    string `json:"i"`
}

// SearchProducts reads up to limit+1 rows from each bucket of the category, in parallel,
// each from the cursor on and ordered by the clustering ((price, id), or (created_at, id)
// descending newest first), and merges them.
func (c *Catalog) SearchProducts(ctx context.Context, q catalog.Search) (paging.Page[catalog.Product], error) {
	var out paging.Page[catalog.Product]
	q, err := q.Validate()
	if err != nil {
		return out, err
	}
	limit := q.Page.Limit + 1
	if q.Sort == catalog.SortNewest {
		stmt, args := newestFirst, []any{}
		if q.Page.Cursor != "" {
			pos, err := catalog.DecodeNewest(q.Page.Cursor)
			if err != nil {
				return out, err
			}
			stmt, args = newestAfter, []any{ts(time.Unix(0, pos.Created)), pos.ID}
		}
		return c.merged(ctx, q, stmt, func(b int) []any { return append(append([]any{q.Category, b}, args...), limit) },
			newer, catalog.NewestCursor)
	}
	after := priceCursor{Price: int64(q.MinPrice)}
	if q.Page.Cursor != "" {
		if err := paging.Decode(q.Page.Cursor, &after); err != nil {
			return out, err
		}
		if after.ID == "" {
			return out, errForeignCursor
		}
	}
	maxPrice := int64(money.Max)
	if q.MaxPrice > 0 {
		maxPrice = int64(q.MaxPrice)
	}
	return c.merged(ctx, q, byCatSearch, func(b int) []any { return []any{q.Category, b, after.Price, after.ID, maxPrice, limit} },
		less, func(last catalog.Product) any { return priceCursor{Price: int64(last.Price), ID: last.ID} })
}

// merged runs stmt on every bucket in parallel and merges the sorted runs into one page.
func (c *Catalog) merged(ctx context.Context, q catalog.Search, stmt string, args func(bucket int) []any,
	before func(a, b catalog.Product) bool, position func(last catalog.Product) any) (paging.Page[catalog.Product], error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	var (
		out   paging.Page[catalog.Product]
		wg    sync.WaitGroup
		runs  [CategoryBuckets][]catalog.Product
		errs  [CategoryBuckets]error
		limit = q.Page.Limit + 1
	)
	for b := 0; b < CategoryBuckets; b++ {
		wg.Add(1)
		go func(b int) {
			defer wg.Done()
			iter := c.p.idempotent(ctx, c.s.Query(stmt, args(b)...).Consistency(c.p.levels().Catalog)).Iter()
			for {
				var p catalog.Product
				if !scanProduct(iter, &p) {
					break
				}
				runs[b] = append(runs[b], p)
			}
			errs[b] = iter.Close()
		}(b)
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return out, fmt.Errorf("search products: %w", err)
	}
	// k-way merge of sorted runs; k is 8, so a linear pick per item is cheapest.
	var pos [CategoryBuckets]int
	for len(out.Items) < limit {
		best := -1
		for b := range runs {
			if pos[b] >= len(runs[b]) {
				continue
			}
			if best < 0 || before(runs[b][pos[b]], runs[best][pos[best]]) {
				best = b
			}
		}
		if best < 0 {
			break
		}
		out.Items = append(out.Items, runs[best][pos[best]])
		pos[best]++
	}
	return paging.Build(out.Items, q.Page.Limit, position), nil
}

func less(a, b catalog.Product) bool {
	if a.Price != b.Price {
		return a.Price < b.Price
	}
	return a.ID < b.ID
}

// newer orders newest first: created_at, then id, descending.
func newer(a, b catalog.Product) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.ID > b.ID
}
