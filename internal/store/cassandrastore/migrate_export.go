package cassandrastore

import (
	"context"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
)

// What `shardmart migrate` (internal/migrate) writes and reads through: the repositories' own
// write paths and row decoders on a session it opened, so a copied row is exactly what the
// shop would have written, and a scanned one what it would have read.

// NewHistory is the history repository on s.
func NewHistory(s *gocql.Session) history.Repository { return (*historyRepo)(&Store{s: s}) }

// NewEvents is the events repository on s, rows living retention after their event.
func NewEvents(s *gocql.Session, retention time.Duration) event.Repository {
	return (*events)(&Store{s: s, eventRetention: retention})
}

// NewCatalog is the catalog read model on s.
func NewCatalog(s *gocql.Session) *Catalog { return (*Catalog)(&Store{s: s}) }

// scanAll reads every row of table (a full, paged scan at QUORUM), decoding each with scan
// and handing it to fn; fn's error stops the scan and is returned.
func scanAll[T any](ctx context.Context, s *gocql.Session, cols, table string, scan func(*gocql.Iter, *T) bool, fn func(T) error) error {
	iter := s.Query(`SELECT ` + cols + ` FROM ` + table).WithContext(ctx).Consistency(gocql.Quorum).PageSize(1000).Iter()
	for {
		var v T
		if !scan(iter, &v) {
			break
		}
		if err := fn(v); err != nil {
			iter.Close()
			return err
		}
	}
	if err := iter.Close(); err != nil {
		return fmt.Errorf("scan %s: %w", table, err)
	}
	return nil
}

// HistoryScan reads every history entry (a full, paged scan), for a verify.
func HistoryScan(ctx context.Context, s *gocql.Session, fn func(history.Entry) error) error {
	return scanAll(ctx, s, historyCols, "order_history", scanEntry, fn)
}

// EventScan reads every event (a full, paged scan), for a verify.
func EventScan(ctx context.Context, s *gocql.Session, fn func(event.Event) error) error {
	return scanAll(ctx, s, eventCols, "user_events", scanEvent, fn)
}

// ProductScan reads every product of the read model (a full, paged scan), for a verify.
func ProductScan(ctx context.Context, s *gocql.Session, fn func(catalog.Product) error) error {
	return scanAll(ctx, s, productCols, "products", scanProduct, fn)
}

// CatalogBucket is the search partition of product id within its category.
func CatalogBucket(id string) int { return bucketOfProduct(id) }

// InsertIfAbsent writes p unless the read model already holds the product, for a backfill
// that runs while the projector feeds the model; it reports whether the model now holds p.
//
// The rows are written at BackfillWriteTime(p), below the write time of every projector upsert
// of a state at least as new (see there), so whichever lands first, the projector's state wins
// and every change after the backfill's read reaches the outbox: the projector brings the row
// to the latest state. A lightweight transaction (IF NOT EXISTS) did not order them: its cells
// carry the Paxos ballot's time, the time of the insert, and a refresh that read the model
// before that insert and wrote after it, at its own earlier time, lost to the older stock.
//
// The read first spares the write of a product already projected. Its search rows would stay
// under a key the projector's row no longer has (a price changed meanwhile), since the
// projector deletes only the search rows of the row it read: after the write, a product row
// holding another write time has them deleted again at the backfill's time, which removes the
// backfill's own cells only.
func (c *Catalog) InsertIfAbsent(ctx context.Context, p catalog.Product) (bool, error) {
	if stored, err := c.productWriteTime(ctx, p.ID); err != nil || stored != 0 {
		return false, err
	}
	wt, bucket, cols := BackfillWriteTime(p), bucketOfProduct(p.ID), productRow(p)
	entries := []gocql.BatchEntry{{Stmt: productInsert, Args: append(cols, wt), Idempotent: true}}
	for _, t := range searchTablesOf(p) {
		entries = append(entries, gocql.BatchEntry{Stmt: t.insert, Args: append(append([]any{bucket}, cols...), wt), Idempotent: true})
	}
	if err := c.batch(ctx, entries); err != nil {
		return false, fmt.Errorf("insert product %s: %w", p.ID, err)
	}
	stored, err := c.productWriteTime(ctx, p.ID)
	if err != nil || stored == wt {
		return err == nil, err
	}
	if !p.Inactive {
		err := c.batch(ctx, []gocql.BatchEntry{
			{Stmt: byCatDelete, Args: []any{wt, p.Category, bucket, int64(p.Price), p.ID}, Idempotent: true},
			{Stmt: newestDelete, Args: []any{wt, p.Category, bucket, ts(p.CreatedAt), p.ID}, Idempotent: true},
		})
		if err != nil {
			return false, fmt.Errorf("delete product %s backfilled search rows: %w", p.ID, err)
		}
	}
	return false, nil
}

// backfillAttempts bounds a backfill batch's rounds of the idempotent policy (each up to
// maxRetries+1 coordinators): a write timeout under load must not end the run, as the
// lightweight transaction's loop did not either, and every entry may be repeated.
const backfillAttempts = 4

// batch runs entries (each idempotent) as one logged batch at the catalog's level, again after
// a timeout or an unavailable coordinator.
func (c *Catalog) batch(ctx context.Context, entries []gocql.BatchEntry) error {
	var err error
	for range backfillAttempts {
		b := c.p.idempotentBatch(ctx, c.s.Batch(gocql.LoggedBatch).Consistency(c.p.levels().Catalog))
		b.Entries = entries
		err = b.Exec()
		if _, bad := outcomeOf(err, false); !bad || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// BackfillWriteTime is the write time a backfill gives product p's rows: 1 µs below the later
// of its CreatedAt and UpdatedAt, truncated to the millisecond as the columns keep them. A
// state's UpdatedAt is no later than the moment it was read, and an upsert of a state read
// since writes at its current time (projectorWriteTime), so above this, even for a refresh of
// this very state (no tie: at equal times Cassandra keeps the larger cell). It assumes the
// clocks that stamp UpdatedAt and run the projector agree to within the time between a change
// and its refresh.
func BackfillWriteTime(p catalog.Product) int64 {
	at := p.UpdatedAt
	if at.Before(p.CreatedAt) {
		at = p.CreatedAt
	}
	return writeTime(at) - 1
}

// productWriteTime is the write time of product id's row read at the catalog's level (0: no row).
func (c *Catalog) productWriteTime(ctx context.Context, id string) (int64, error) {
	var wt int64
	iter := c.p.idempotent(ctx, c.s.Query(`SELECT WRITETIME(price) FROM products WHERE product_id = ?`, id).
		Consistency(c.p.levels().Catalog)).Iter()
	iter.Scan(&wt)
	if err := iter.Close(); err != nil {
		return 0, fmt.Errorf("read product %s: %w", id, err)
	}
	return wt, nil
}

// productRow is p as the products table's columns (productCols), empty maps for nil ones.
func productRow(p catalog.Product) []any {
	attrs, stock := p.Attributes, p.Stock
	if attrs == nil {
		attrs = map[string]string{}
	}
	if stock == nil {
		stock = map[string]int64{}
	}
	return []any{p.ID, p.Name, p.Description, !p.Inactive, p.Category, int64(p.Price), attrs, stock, ts(p.CreatedAt), ts(p.UpdatedAt)}
}
