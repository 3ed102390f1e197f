package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/outbox"
)

type outboxLog DB

func appendOutbox(ctx context.Context, tx *sql.Tx, topic, key string, payload []byte, at time.Time) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (topic, key, payload, created_at) VALUES (?, ?, ?, ?)`,
		topic, key, payload, nanos(at)); err != nil {
		return fmt.Errorf("append outbox %s: %w", topic, err)
	}
	return nil
}

func (l *outboxLog) ReadOutbox(ctx context.Context, after int64, limit int) ([]outbox.Message, error) {
	rows, err := l.r.QueryContext(ctx, `SELECT seq, topic, key, payload, created_at FROM outbox
		WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	defer rows.Close()
	var out []outbox.Message
	for rows.Next() {
		var m outbox.Message
		var at int64
		if err := rows.Scan(&m.Seq, &m.Topic, &m.Key, &m.Payload, &at); err != nil {
			return nil, err
		}
		m.At = fromNanos(at)
		out = append(out, m)
	}
	return out, rows.Err()
}

func (l *outboxLog) Checkpoint(ctx context.Context, consumer string) (int64, error) {
	var seq int64
	err := l.r.QueryRowContext(ctx, `SELECT seq FROM outbox_checkpoints WHERE consumer = ?`, consumer).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return seq, err
}

// SaveCheckpoint only moves a checkpoint forward: two drains of one consumer may finish out of
// order (several processes), and the slower must not take it back over what the faster applied.
// A move of the orders family freezes the checkpoints once the consumers caught up.
func (l *outboxLog) SaveCheckpoint(ctx context.Context, consumer string, seq int64) error {
	return (*DB)(l).scopedTx(ctx, FreezeOutboxCheckpoints, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO outbox_checkpoints (consumer, seq) VALUES (?, ?)
			ON CONFLICT (consumer) DO UPDATE SET seq = excluded.seq WHERE excluded.seq > outbox_checkpoints.seq`, consumer, seq)
		return err
	})
}

// LastSeq reads AUTOINCREMENT's high-water mark, not max(seq): pruning deletes the newest rows
// too once everything is consumed, and "the store is empty" must not come back then.
func (l *outboxLog) LastSeq(ctx context.Context) (int64, error) {
	var seq int64
	err := l.r.QueryRowContext(ctx, `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0)`).Scan(&seq)
	return seq, err
}

func (l *outboxLog) CountOutbox(ctx context.Context) (int64, error) {
	var n int64
	if err := l.r.QueryRowContext(ctx, `SELECT count(*) FROM outbox`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count outbox: %w", err)
	}
	return n, nil
}

// DeleteOutbox deletes in chunks, each its own transaction, so the single writer is never held
// for long behind a big backlog.
func (l *outboxLog) DeleteOutbox(ctx context.Context, through int64) (int64, error) {
	const chunk = 5000
	var total int64
	for {
		var n int64
		err := (*DB)(l).tx(ctx, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE seq IN (SELECT seq FROM outbox WHERE seq <= ? ORDER BY seq LIMIT ?)`, through, chunk)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("delete outbox through %d: %w", through, err)
		}
		if n < chunk {
			return total, nil
		}
	}
}
