package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
)

// ReadSnapshot reads the orders family as one moment of the store sees it: every read of it runs
// in one read transaction (WAL: a snapshot from its first read on), beside the writer.
type ReadSnapshot struct {
	conn *sql.Conn
}

// ReadSnapshot opens a read snapshot; Close ends it. A plain BEGIN (deferred) is issued on a
// connection of its own: database/sql's BeginTx would use the pool's BEGIN IMMEDIATE, which
// takes the write lock.
func (db *DB) ReadSnapshot(ctx context.Context) (*ReadSnapshot, error) {
	conn, err := db.r.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlite: snapshot connection: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		conn.Close()
		return nil, fmt.Errorf("sqlite: begin snapshot: %w", err)
	}
	var n int
	// The first read fixes the snapshot.
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM write_freezes`).Scan(&n); err != nil {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
		conn.Close()
		return nil, fmt.Errorf("sqlite: start snapshot: %w", err)
	}
	return &ReadSnapshot{conn: conn}, nil
}

// Close ends the snapshot.
func (s *ReadSnapshot) Close() error {
	_, err := s.conn.ExecContext(context.Background(), `ROLLBACK`)
	return errors.Join(err, s.conn.Close())
}

// Count returns the rows of table (a family's table, as named in the schema).
func (s *ReadSnapshot) Count(ctx context.Context, table string) (int64, error) {
	switch table {
	case "products", "orders", "users", "cart_fences", "outbox", "outbox_checkpoints", "sessions", "carts", "order_history", "events":
	default:
		return 0, fmt.Errorf("sqlite: snapshot count: unknown table %q", table)
	}
	var n int64
	if err := s.conn.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count %s: %w", table, err)
	}
	return n, nil
}

// each runs query and calls fn with every row.
func (s *ReadSnapshot) each(ctx context.Context, what, query string, fn func(rowScanner) error, args ...any) error {
	rows, err := s.conn.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("sqlite: read %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("sqlite: read %s: %w", what, err)
	}
	return nil
}

// Products calls fn with every product and its stock, by id.
func (s *ReadSnapshot) Products(ctx context.Context, fn func(catalog.Product) error) error {
	return s.each(ctx, "products", ProductSelect+` ORDER BY p.id`, func(r rowScanner) error {
		p, err := scanProduct(r)
		if err != nil {
			return err
		}
		return fn(p)
	})
}

// Orders calls fn with every order, by id.
func (s *ReadSnapshot) Orders(ctx context.Context, fn func(order.Order) error) error {
	return s.each(ctx, "orders", `SELECT `+orderColumns+` FROM orders ORDER BY id`, func(r rowScanner) error {
		o, err := scanOrder(r)
		if err != nil {
			return err
		}
		return fn(o)
	})
}

// Users calls fn with every user (password hash included), by id.
func (s *ReadSnapshot) Users(ctx context.Context, fn func(account.User) error) error {
	return s.each(ctx, "users", `SELECT id, email, password_hash, created_at FROM users ORDER BY id`, func(r rowScanner) error {
		var u account.User
		var created int64
		if err := r.Scan(&u.ID, &u.Email, &u.PasswordHash, &created); err != nil {
			return err
		}
		u.CreatedAt = fromNanos(created)
		return fn(u)
	})
}

// CartFences calls fn with every fenced cart (a cart no stale checkout may order from).
func (s *ReadSnapshot) CartFences(ctx context.Context, fn func(cartID string, at time.Time) error) error {
	return s.each(ctx, "cart fences", `SELECT cart_id, at FROM cart_fences ORDER BY cart_id`, func(r rowScanner) error {
		var id string
		var at int64
		if err := r.Scan(&id, &at); err != nil {
			return err
		}
		return fn(id, fromNanos(at))
	})
}

// Outbox calls fn with every outbox message after seq, in seq order.
func (s *ReadSnapshot) Outbox(ctx context.Context, after int64, fn func(outbox.Message) error) error {
	return s.each(ctx, "outbox", `SELECT seq, topic, key, payload, created_at FROM outbox WHERE seq > ? ORDER BY seq`, func(r rowScanner) error {
		var m outbox.Message
		var at int64
		if err := r.Scan(&m.Seq, &m.Topic, &m.Key, &m.Payload, &at); err != nil {
			return err
		}
		m.At = fromNanos(at)
		return fn(m)
	}, after)
}

// Checkpoints returns every outbox consumer's checkpoint.
func (s *ReadSnapshot) Checkpoints(ctx context.Context) (map[string]int64, error) {
	out := map[string]int64{}
	err := s.each(ctx, "outbox checkpoints", `SELECT consumer, seq FROM outbox_checkpoints`, func(r rowScanner) error {
		var c string
		var seq int64
		if err := r.Scan(&c, &seq); err != nil {
			return err
		}
		out[c] = seq
		return nil
	})
	return out, err
}

// LastSeq is the outbox's high-water mark in the snapshot.
func (s *ReadSnapshot) LastSeq(ctx context.Context) (int64, error) {
	var seq int64
	err := s.conn.QueryRowContext(ctx, `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'outbox'), 0)`).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("sqlite: outbox last seq: %w", err)
	}
	return seq, nil
}
