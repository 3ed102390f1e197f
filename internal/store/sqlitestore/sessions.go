package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/session"
)

type sessions DB

func (r *sessions) CreateSession(ctx context.Context, s session.Session) (err error) {
	data, err := json.Marshal(nonNilMap(s.Data))
	if err != nil {
		return err
	}
	_, err = r.w.ExecContext(ctx, `INSERT INTO sessions (id, user_id, created_at, last_active, expires_at, ip, user_agent, status, data)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, s.ID, s.UserID, nanos(s.CreatedAt), nanos(s.LastActive), nanos(s.ExpiresAt),
		s.IP, s.UserAgent, string(s.Status), string(data))
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

const sessionColumns = `id, user_id, created_at, last_active, expires_at, ip, user_agent, status, data`

// scanSession decodes a row of sessionColumns.
func scanSession(row rowScanner) (session.Session, error) {
	var s session.Session
	var created, last, expires int64
	var data string
	if err := row.Scan(&s.ID, &s.UserID, &created, &last, &expires, &s.IP, &s.UserAgent, &s.Status, &data); err != nil {
		return s, err
	}
	s.CreatedAt, s.LastActive, s.ExpiresAt = fromNanos(created), fromNanos(last), fromNanos(expires)
	if err := json.Unmarshal([]byte(data), &s.Data); err != nil {
		return s, fmt.Errorf("session %s data: %w", s.ID, err)
	}
	return s, nil
}

func getSession(ctx context.Context, q queryRower, id string, now time.Time) (session.Session, error) {
	s, err := scanSession(q.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ? AND expires_at > ?`, id, nanos(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return s, session.ErrNotFound
	}
	return s, err
}

func (r *sessions) GetSession(ctx context.Context, id string, now time.Time) (s session.Session, err error) {
	return getSession(ctx, r.r, id, now)
}

func (r *sessions) BindUser(ctx context.Context, id, userID string, now time.Time) (s session.Session, err error) {
	err = (*DB)(r).tx(ctx, func(tx *sql.Tx) error {
		s, err = getSession(ctx, tx, id, now)
		if err != nil {
			return err
		}
		switch s.UserID {
		case userID:
			return nil
		case "":
			s.UserID = userID
			_, err := tx.ExecContext(ctx, `UPDATE sessions SET user_id = ? WHERE id = ?`, userID, id)
			return err
		default:
			return session.ErrBoundToOtherUser
		}
	})
	return s, err
}

func (r *sessions) Touch(ctx context.Context, id string, now time.Time) (err error) {
	_, err = r.w.ExecContext(ctx, `UPDATE sessions SET last_active = ? WHERE id = ? AND expires_at > ?`, nanos(now), id, nanos(now))
	return err
}

func (r *sessions) Revoke(ctx context.Context, id string) (err error) {
	_, err = r.w.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
	return err
}

func (r *sessions) PurgeExpired(ctx context.Context, now time.Time) (n int, err error) {
	res, err := r.w.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, nanos(now))
	if err != nil {
		return 0, err
	}
	affected, err := res.RowsAffected()
	return int(affected), err
}
