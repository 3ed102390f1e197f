package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/paging"
)

type historyRepo DB

// UpsertEntry keeps the newer of two versions of an entry (by updated_at): an order's follow-ups
// are applied by its request and, when that did not finish, by the projector, so an older
// status can arrive after a newer one.
func (r *historyRepo) UpsertEntry(ctx context.Context, e history.Entry) (err error) {
	items, err := json.Marshal(e.Items)
	if err != nil {
		return err
	}
	_, err = r.w.ExecContext(ctx, `INSERT INTO order_history (user_id, placed_at, order_id, updated_at, status, zone, total, items)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (user_id, placed_at, order_id) DO UPDATE SET updated_at = excluded.updated_at,
			status = excluded.status, zone = excluded.zone, total = excluded.total, items = excluded.items
		WHERE excluded.updated_at >= order_history.updated_at`,
		e.UserID, nanos(e.PlacedAt), e.OrderID, nanos(e.UpdatedAt), string(e.Status), e.Zone, int64(e.Total), string(items))
	if err != nil {
		return fmt.Errorf("upsert history: %w", err)
	}
	return nil
}

func (r *historyRepo) ListHistory(ctx context.Context, userID string, req paging.Request) (page paging.Page[history.Entry], err error) {
	req, err = req.Normalize()
	if err != nil {
		return page, err
	}
	before := timeCursor{At: math.MaxInt64}
	if req.Cursor != "" {
		if err := paging.Decode(req.Cursor, &before); err != nil {
			return page, err
		}
	}
	rows, err := r.r.QueryContext(ctx, `SELECT `+historyColumns+` FROM order_history
		WHERE user_id = ?1 AND (placed_at < ?2 OR (placed_at = ?2 AND order_id < ?3))
		ORDER BY placed_at DESC, order_id DESC LIMIT ?4`, userID, before.At, before.ID, req.Limit+1)
	if err != nil {
		return page, fmt.Errorf("list history: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return page, err
		}
		page.Items = append(page.Items, e)
	}
	if err := rows.Err(); err != nil {
		return page, err
	}
	return paging.Build(page.Items, req.Limit, func(last history.Entry) any { return timeCursor{At: nanos(last.PlacedAt), ID: last.OrderID} }), nil
}

const historyColumns = `user_id, placed_at, order_id, updated_at, status, zone, total, items`

// scanEntry reads a row of historyColumns.
func scanEntry(row rowScanner) (history.Entry, error) {
	var e history.Entry
	var placed, updated int64
	var items string
	if err := row.Scan(&e.UserID, &placed, &e.OrderID, &updated, &e.Status, &e.Zone, &e.Total, &items); err != nil {
		return e, err
	}
	e.PlacedAt, e.UpdatedAt = fromNanos(placed), fromNanos(updated)
	if err := json.Unmarshal([]byte(items), &e.Items); err != nil {
		return e, fmt.Errorf("history %s items: %w", e.OrderID, err)
	}
	return e, nil
}
