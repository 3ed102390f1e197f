package cassandrastore

import (
	"context"
	"fmt"
	"maps"
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
func NewHistory(s *gocql.Session) history.Repository { return &History{s: s} }

// NewEvents is the events repository on s, rows living retention after their event.
func NewEvents(s *gocql.Session, retention time.Duration) event.Repository {
	return &Events{s: s, retention: retention}
}

// NewCatalog is the catalog read model on s.
func NewCatalog(s *gocql.Session) *Catalog { return &Catalog{s: s} }

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
// that runs while the projector feeds the model. The products table's stock changes without
// UpdatedAt moving, so a version check cannot order a backfilled state against a projected
// one; instead the product row is inserted with a lightweight transaction (IF NOT EXISTS)
// and the projector's write, whichever came, is left alone: every change after the backfill
// read it reaches the outbox, so the projector brings the row to the latest state. Search rows
// follow only when the insert applied, at a write time below UpsertProduct's (the product's
// UpdatedAt): when the projector moved the product meanwhile, its delete of the old search row
// shadows them. Returns whether it inserted.
func (c *Catalog) InsertIfAbsent(ctx context.Context, p catalog.Product) (bool, error) {
	cols := productRow(p)
	applied, err := casLoop(ctx, c.p, fmt.Sprintf("insert product %s", p.ID), c.insertRound(p, cols))
	if err != nil {
		return false, err
	}
	if !applied || p.Inactive {
		return applied, nil
	}
	at := p.UpdatedAt
	if at.Before(p.CreatedAt) {
		at = p.CreatedAt
	}
	wt := writeTime(at)
	bucket := bucketOfProduct(p.ID)
	b := c.s.Batch(gocql.LoggedBatch).WithContext(ctx).Consistency(c.p.levels().Catalog)
	for _, t := range searchTablesOf(p) {
		b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: t.insert, Args: append(append([]any{bucket}, cols...), wt), Idempotent: true})
	}
	if err := b.Exec(); err != nil {
		return true, fmt.Errorf("insert product %s search rows: %w", p.ID, err)
	}
	return true, nil
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

// insertRound is one round of InsertIfAbsent's loop. The first proposes at once (a backfill
// reads nothing it need not). After a refusal the row was there first: not inserted. After an
// unknown outcome (a timeout under load) the round reads the row at SERIAL, which completes
// any proposal Paxos accepted: absent, the insert is proposed again; holding exactly p, our
// insert applied; anything else, another writer's came first.
func (c *Catalog) insertRound(p catalog.Product, cols []any) casRound[bool] {
	return func(ctx context.Context, a casAttempt) (bool, *casOp[bool], error) {
		if a.refused {
			return false, nil, nil
		}
		if a.n > 0 {
			var got catalog.Product
			iter := c.s.Query(productSelect, p.ID).WithContext(ctx).Consistency(a.cl).Iter()
			found := scanProduct(iter, &got)
			if err := iter.Close(); err != nil {
				return false, nil, fmt.Errorf("read product %s: %w", p.ID, err)
			}
			if found {
				return sameProductRow(got, p), nil, nil
			}
		}
		q := c.s.Query(`INSERT INTO products (`+productCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) IF NOT EXISTS`, cols...).
			WithContext(ctx).Consistency(c.p.levels().Catalog).SerialConsistency(c.p.levels().Serial)
		return false, &casOp[bool]{query: q, applied: func() bool { return true }}, nil
	}
}

// sameProductRow reports whether a row read back holds exactly what productRow(p) wrote
// (timestamps as the column keeps them, in milliseconds).
func sameProductRow(got, p catalog.Product) bool {
	sameTime := func(a, b time.Time) bool {
		return a.Truncate(time.Millisecond).Equal(b.Truncate(time.Millisecond))
	}
	return got.ID == p.ID && got.Name == p.Name && got.Description == p.Description &&
		got.Inactive == p.Inactive && got.Category == p.Category && got.Price == p.Price &&
		maps.Equal(got.Attributes, p.Attributes) && maps.Equal(got.Stock, p.Stock) &&
		sameTime(got.CreatedAt, p.CreatedAt) && sameTime(got.UpdatedAt, p.UpdatedAt)
}
