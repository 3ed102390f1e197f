package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/shardmart/shardmart/internal/account"
)

type users DB

func (r *users) CreateUser(ctx context.Context, u account.User) (err error) {
	return (*DB)(r).scopedTx(ctx, ordersScope, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO users (id, email, password_hash, created_at) VALUES (?, ?, ?, ?)
			ON CONFLICT DO NOTHING`, u.ID, u.Email, u.PasswordHash, nanos(u.CreatedAt))
		if err != nil {
			return fmt.Errorf("insert user: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return account.ErrEmailTaken
		}
		return nil
	})
}

func (r *users) UserByEmail(ctx context.Context, email string) (u account.User, err error) {
	var created int64
	err = r.r.QueryRowContext(ctx, `SELECT id, email, password_hash, created_at FROM users WHERE email = ?`, email).
		Scan(&u.ID, &u.Email, &u.PasswordHash, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return u, account.ErrNotFound
	}
	u.CreatedAt = fromNanos(created)
	return u, err
}
