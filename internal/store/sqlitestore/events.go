package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/paging"
)

type events DB

func (r *events) AppendEvent(ctx context.Context, e event.Event) (err error) {
	details, err := json.Marshal(nonNilMap(e.Details))
	if err != nil {
		return err
	}
	_, err = r.w.ExecContext(ctx, `INSERT INTO events (actor, day, at, id, type, product_id, details) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`, e.Actor, event.Day(e.At).Unix(), nanos(e.At), e.ID, string(e.Type), e.ProductID, string(details))
	if err != nil {
		return fmt.Errorf("insert event: %w", err)
	}
	return nil
}

func (r *events) PurgeEvents(ctx context.Context, before time.Time) (n int, err error) {
	res, err := r.w.ExecContext(ctx, `DELETE FROM events WHERE at < ?`, nanos(before))
	if err != nil {
		return 0, fmt.Errorf("purge events: %w", err)
	}
	affected, err := res.RowsAffected()
	return int(affected), err
}

type timeCursor struct {
	At int64  `json:"t"`
	ID string `json:"i"`
}

func (r *events) ListEvents(ctx context.Context, q event.Query) (page paging.Page[event.Event], err error) {
	req, err := q.Page.Normalize()
	if err != nil {
		return page, err
	}
	before := timeCursor{At: math.MaxInt64}
	if req.Cursor != "" {
		if err := paging.Decode(req.Cursor, &before); err != nil {
			return page, err
		}
	}
	rows, err := r.r.QueryContext(ctx, `SELECT `+eventColumns+` FROM events
		WHERE actor = ?1 AND day = ?2 AND (?3 = '' OR type = ?3) AND (at < ?4 OR (at = ?4 AND id < ?5))
		ORDER BY at DESC, id DESC LIMIT ?6`,
		q.Actor, event.Day(q.Day).Unix(), string(q.Type), before.At, before.ID, req.Limit+1)
	if err != nil {
		return page, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return page, err
		}
		page.Items = append(page.Items, e)
	}
	if err := rows.Err(); err != nil {
		return page, err
	}
	return paging.Build(page.Items, req.Limit, func(last event.Event) any { return timeCursor{At: nanos(last.At), ID: last.ID} }), nil
}

const eventColumns = `actor, at, id, type, product_id, details`

// scanEvent reads a row of eventColumns.
func scanEvent(row rowScanner) (event.Event, error) {
	var e event.Event
	var at int64
	var details string
	if err := row.Scan(&e.Actor, &at, &e.ID, &e.Type, &e.ProductID, &details); err != nil {
		return e, err
	}
	e.At = fromNanos(at)
	if err := json.Unmarshal([]byte(details), &e.Details); err != nil {
		return e, fmt.Errorf("event %s details: %w", e.ID, err)
	}
	return e, nil
}
