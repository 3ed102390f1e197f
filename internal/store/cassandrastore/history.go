package cassandrastore

import (
	"context"
	"fmt"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
)

// historyRepo implements history.Repository on order_history (one partition per user per month)
// and order_history_buckets (the months a user has orders in), at QUORUM (CAS-1).
type historyRepo Store

const (
	historyInsert = `INSERT INTO order_history (user_id, bucket, placed_at, order_id, status, zone, total, updated_at, items)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`
	historyBucketInsert = `INSERT INTO order_history_buckets (user_id, bucket) VALUES (?, ?)`
	historyBuckets      = `SELECT bucket FROM order_history_buckets WHERE user_id = ?`
	historyCols         = `user_id, placed_at, order_id, status, zone, total, updated_at, items`
	historyList         = `SELECT ` + historyCols + ` FROM order_history WHERE user_id = ? AND bucket = ?`
)

// scanEntry reads a row of historyCols.
func scanEntry(iter *gocql.Iter, e *history.Entry) bool {
	var status string
	var total int64
	var lines []orderLine
	if !iter.Scan(&e.UserID, &e.PlacedAt, &e.OrderID, &status, &e.Zone, &total, &e.UpdatedAt, &lines) {
		return false
	}
	e.Status, e.Total = order.Status(status), money.Amount(total)
	for _, l := range lines {
		e.Items = append(e.Items, order.Item{ProductID: l.ProductID, Category: l.Category, Name: l.Name, Quantity: l.Quantity, UnitPrice: money.Amount(l.UnitPrice)})
	}
	return true
}

// orderLine is the order_line UDT.
type orderLine struct {
	ProductID string `cql:"product_id"`
	Category  string `cql:"category"`
	Name      string `cql:"name"`
	Quantity  int64  `cql:"quantity"`
	UnitPrice int64  `cql:"unit_price"`
}

// bucketOf is the month partition of an order: yyyymm of placed_at in UTC. A month bounds a
// wholesale buyer's partition (10 000 orders a month of ~0.5 KB is ~5 MB) while a shopper
// with a few orders a year reads one or two partitions per page.
func bucketOf(t time.Time) int {
	t = t.UTC()
	return t.Year()*100 + int(t.Month())
}

// UpsertEntry writes the entry at write time = its UpdatedAt, so a replayed older status
// (the projector delivers at least once) can never overwrite a newer one, and replaying the
// same entry rewrites the same row. The bucket index and the entry are two partitions written
// at once (one round trip on a checkout's path, not two): the entry is complete, for the
// buyer's read after the checkout, once both are; if only the entry is written, the error has
// the outbox apply the entry again, and a reader misses it until then, as it misses one not
// applied yet.
func (r *historyRepo) UpsertEntry(ctx context.Context, e history.Entry) error {
	ctx, cancel := bounded(ctx)
	defer cancel()
	b := bucketOf(e.PlacedAt)
	lines := make([]orderLine, len(e.Items))
	for i, it := range e.Items {
		lines[i] = orderLine{ProductID: it.ProductID, Category: it.Category, Name: it.Name, Quantity: it.Quantity, UnitPrice: int64(it.UnitPrice)}
	}
	at := e.UpdatedAt
	if at.Before(e.PlacedAt) {
		at = e.PlacedAt
	}
	level := r.p.levels().History
	bucket := r.p.idempotent(ctx, r.s.Query(historyBucketInsert, e.UserID, b).Consistency(level))
	entry := r.p.idempotent(ctx, r.s.Query(historyInsert, e.UserID, b, ts(e.PlacedAt), e.OrderID, string(e.Status), e.Zone, int64(e.Total), ts(e.UpdatedAt), lines,
		writeTime(at)).Consistency(level))
	if err := execAll([]*gocql.Query{bucket, entry}); err != nil {
		return fmt.Errorf("history entry of order %s: %w", e.OrderID, err)
	}
	return nil
}

// writeTime is a client-chosen write timestamp in microseconds; the low three digits stay
// zero so that the timestamp depends only on the millisecond the domain recorded.
func writeTime(t time.Time) int64 {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Truncate(time.Millisecond).UnixMicro()
}

func (r *historyRepo) ListHistory(ctx context.Context, userID string, req paging.Request) (paging.Page[history.Entry], error) {
	var out paging.Page[history.Entry]
	page, err := req.Normalize()
	if err != nil {
		return out, err
	}
	fp := fingerprint("history", userID)
	var cur driverCursor
	if page.Cursor != "" {
		if err := paging.Decode(page.Cursor, &cur); err != nil {
			return out, err
		}
		if cur.Q != fp || cur.B == 0 {
			return out, errForeignCursor
		}
	}
	ctx, cancel := bounded(ctx)
	defer cancel()
	var buckets []int
	iter := r.p.idempotent(ctx, r.s.Query(historyBuckets, userID).Consistency(r.p.levels().History)).Iter()
	var b int
	for iter.Scan(&b) {
		if cur.B == 0 || b <= cur.B {
			buckets = append(buckets, b)
		}
	}
	if err := iter.Close(); err != nil {
		return out, fmt.Errorf("history buckets: %w", err)
	}
	var state []byte
	if len(buckets) > 0 && buckets[0] == cur.B {
		state = cur.S
	}
	for i, b := range buckets {
		want := page.Limit - len(out.Items)
		iter := r.p.idempotent(ctx, r.s.Query(historyList, userID, b).Consistency(r.p.levels().History).
			PageSize(want).PageState(state)).Iter()
		state = nil
		for {
			var e history.Entry
			if !scanEntry(iter, &e) {
				break
			}
			out.Items = append(out.Items, e)
		}
		next := iter.PageState()
		if err := iter.Close(); err != nil {
			return out, cursorErr(fmt.Errorf("list history: %w", err), cur.S)
		}
		if len(next) > 0 {
			out.Next = paging.Encode(driverCursor{Q: fp, B: b, S: next})
			return out, nil
		}
		if len(out.Items) >= page.Limit {
			if i+1 < len(buckets) {
				out.Next = paging.Encode(driverCursor{Q: fp, B: buckets[i+1]})
			}
			return out, nil
		}
	}
	return out, nil
}
