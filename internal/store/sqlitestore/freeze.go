package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/store"
)

// A write freeze is a row in write_freezes. Every write transaction of a frozen scope reads
// that table inside itself, and SQLite runs one writer at a time: once Freeze commits, no
// write of the scope commits after it, so a copy read at any later snapshot misses nothing.
// Reads are never frozen. The tables are created outside the numbered upgrades: a store
// without them reads the same as one with no freeze.
const freezeSchema = `
CREATE TABLE IF NOT EXISTS write_freezes (
	scope TEXT PRIMARY KEY,  -- a family, or FreezeOutboxCheckpoints
	since INTEGER NOT NULL,
	why   TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS moves (
	family TEXT PRIMARY KEY,
	state  TEXT NOT NULL      -- JSON, owned by the mover (internal/mongomove)
) WITHOUT ROWID;
`

// FreezeOutboxCheckpoints is the scope that stops the outbox consumers' checkpoints moving:
// a move freezes it after the consumers caught up, so the checkpoints it copies are final.
const FreezeOutboxCheckpoints = "outbox_checkpoints"

// ordersScope is the transactional family: orders, products with stock, users, idempotency
// keys, cart fences and the outbox rows they append.
const ordersScope = string(family.Orders)

func ensureFreezeSchema(ctx context.Context, w *sql.DB) error {
	if _, err := w.ExecContext(ctx, freezeSchema); err != nil {
		return fmt.Errorf("sqlite: create freeze tables: %w", err)
	}
	return nil
}

// checkFrozen fails with store.Frozen when scope is frozen; q must be the write transaction.
func checkFrozen(ctx context.Context, q queryRower, scope string) error {
	var since int64
	err := q.QueryRowContext(ctx, `SELECT since FROM write_freezes WHERE scope = ?`, scope).Scan(&since)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: read write freeze: %w", err)
	}
	return store.Frozen(scope, family.SQLite)
}

// scopedTx is tx for a write of scope: refused once scope is frozen.
func (db *DB) scopedTx(ctx context.Context, scope string, fn func(tx *sql.Tx) error) error {
	return db.tx(ctx, func(tx *sql.Tx) error {
		if err := checkFrozen(ctx, tx, scope); err != nil {
			return err
		}
		return fn(tx)
	})
}

// Freeze stops every later write of scope (a family name or FreezeOutboxCheckpoints) and
// returns when that holds: the freeze has committed. Freezing a frozen scope keeps its time.
func (db *DB) Freeze(ctx context.Context, scope, why string) (since time.Time, err error) {
	err = db.tx(ctx, func(tx *sql.Tx) error {
		now := time.Now().UnixNano()
		if _, err := tx.ExecContext(ctx, `INSERT INTO write_freezes (scope, since, why) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, scope, now, why); err != nil {
			return err
		}
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT since FROM write_freezes WHERE scope = ?`, scope).Scan(&n); err != nil {
			return err
		}
		since = fromNanos(n)
		return nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlite: freeze %s: %w", scope, err)
	}
	return since, nil
}

// Unfreeze lets scope's writes commit again.
func (db *DB) Unfreeze(ctx context.Context, scope string) error {
	if _, err := db.w.ExecContext(ctx, `DELETE FROM write_freezes WHERE scope = ?`, scope); err != nil {
		return fmt.Errorf("sqlite: unfreeze %s: %w", scope, err)
	}
	return nil
}

// FrozenSince says since when scope is frozen; ok is false when it is not.
func (db *DB) FrozenSince(ctx context.Context, scope string) (since time.Time, ok bool, err error) {
	var n int64
	err = db.r.QueryRowContext(ctx, `SELECT since FROM write_freezes WHERE scope = ?`, scope).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("sqlite: read write freeze: %w", err)
	}
	return fromNanos(n), true, nil
}

// MoveState reads the mover's recorded state of fam ("" when none).
func (db *DB) MoveState(ctx context.Context, fam string) (string, error) {
	var s string
	err := db.r.QueryRowContext(ctx, `SELECT state FROM moves WHERE family = ?`, fam).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("sqlite: read move state of %s: %w", fam, err)
	}
	return s, nil
}

// SaveMoveState records the mover's state of fam.
func (db *DB) SaveMoveState(ctx context.Context, fam, state string) error {
	_, err := db.w.ExecContext(ctx, `INSERT INTO moves (family, state) VALUES (?, ?) ON CONFLICT (family) DO UPDATE SET state = excluded.state`, fam, state)
	if err != nil {
		return fmt.Errorf("sqlite: save move state of %s: %w", fam, err)
	}
	return nil
}
