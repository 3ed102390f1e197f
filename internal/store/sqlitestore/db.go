// Package sqlitestore is the embedded default backend: one SQLite file in WAL mode holding every
// data family. Writes go through a single connection (SQLite has one writer anyway, and
// queueing in Go avoids SQLITE_BUSY spins); reads use a pool that runs beside the writer.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/session"
)

// DB is an open embedded store.
type DB struct {
	w *sql.DB // exactly one connection: all writes
	r *sql.DB // read-only pool
}

// Open opens (creating if needed) the database file at path and upgrades its schema.
func Open(ctx context.Context, path string) (*DB, error) {
	return open(ctx, path, defaultDriver)
}

// OpenTraced is Open with a span per statement, row iteration included, and per transaction
// begin and commit, in the requests tr samples.
func OpenTraced(ctx context.Context, path string, tr trace.Tracer) (*DB, error) {
	drv := defaultDriver
	drv.tracer = tr
	return open(ctx, path, drv)
}

func open(ctx context.Context, path string, drv driver) (*DB, error) {
	if path == "" {
		return nil, errors.New("sqlite: empty database path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("sqlite: create %s: %w", dir, err)
		}
	}
	w, err := drv.open(path, false)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := upgradeSchema(ctx, w); err != nil {
		w.Close()
		return nil, err
	}
	if err := ensureFreezeSchema(ctx, w); err != nil {
		w.Close()
		return nil, err
	}
	r, err := drv.open(path, true)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open reader %s: %w", path, err)
	}
	n := max(4, 2*runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	r.SetConnMaxLifetime(0)
	return &DB{w: w, r: r}, nil
}

// Close closes both pools.
func (db *DB) Close() error { return errors.Join(db.r.Close(), db.w.Close()) }

// Ping reads through both pools: the file is open and readable by the writer and the readers.
func (db *DB) Ping(ctx context.Context) error {
	var n int
	for _, p := range []*sql.DB{db.w, db.r} {
		if err := p.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&n); err != nil {
			return fmt.Errorf("sqlite: %w", err)
		}
	}
	return nil
}

// driver is a database/sql driver name and how it spells the connection options; tracer, when
// set, adds a span per statement of a traced request (traced.go).
type driver struct {
	name   string
	dsn    func(path string, readOnly bool) string
	tracer trace.Tracer
}

func fileURI(path string, q url.Values) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// tx runs fn in a write transaction, committing on success.
func (db *DB) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Family accessors used by placement.
func (db *DB) Orders() order.Repository     { return (*orders)(db) }
func (db *DB) Products() catalog.Repository { return (*products)(db) }
func (db *DB) Outbox() outbox.Log           { return (*outboxLog)(db) }
func (db *DB) Users() account.Repository    { return (*users)(db) }
func (db *DB) Carts() cart.Repository       { return (*carts)(db) }
func (db *DB) Sessions() session.Repository { return (*sessions)(db) }
func (db *DB) Events() event.Repository     { return (*events)(db) }
func (db *DB) History() history.Repository  { return (*historyRepo)(db) }
