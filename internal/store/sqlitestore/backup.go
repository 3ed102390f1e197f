package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"
)

// backupStepPages is how many pages one backup step copies (4 MiB at the default page size):
// steps let a cancelled backup stop and let the caller report progress.
const backupStepPages = 1024

// Snapshot describes an online copy made by Backup.
type Snapshot struct {
	// ConsistentAt is read after the copy's read transaction began and before its snapshot
	// was fixed: every commit acknowledged before it is in the copy.
	ConsistentAt time.Time
	// SnapshotFixed is read right after the snapshot was fixed: no commit that began after it
	// is in the copy. Commits between the two instants (microseconds) may or may not be.
	SnapshotFixed time.Time
	Pages         int
	PageSize      int64
	SQLiteVersion string
}

// Backup copies the live database at src into the new file dst with SQLite's online backup
// API while other connections and processes keep writing to src. The copy is taken inside one
// read transaction that this function opens and holds until the last page is copied, so it is
// the database as of one commit (WAL keeps that snapshot readable beside the writer), and
// writes to src never restart it. The copy is left in rollback-journal mode: one
// self-contained file, with no -wal beside it. progress, if not nil, is told the pages copied
// of the total after each step.
func Backup(ctx context.Context, src, dst string, progress func(copied, total int)) (Snapshot, error) {
	if _, err := os.Stat(src); err != nil {
		return Snapshot{}, fmt.Errorf("sqlite backup: source: %w", err) // opening would create an empty database
	}
	if _, err := os.Stat(dst); err == nil {
		return Snapshot{}, fmt.Errorf("sqlite backup: %s already exists", dst)
	}
	// The source's journal mode is left as it is (WAL is a property of the file), and this
	// connection cannot write.
	srcConn, closeSrc, err := openConn(ctx, src, url.Values{"_busy_timeout": {"5000"}, "_query_only": {"true"}})
	if err != nil {
		return Snapshot{}, err
	}
	defer closeSrc()
	dstConn, closeDst, err := openConn(ctx, dst, url.Values{"_busy_timeout": {"5000"}})
	if err != nil {
		return Snapshot{}, err
	}
	defer closeDst()

	var snap Snapshot
	if err := srcConn.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&snap.SQLiteVersion); err != nil {
		return Snapshot{}, fmt.Errorf("sqlite backup: %w", err)
	}
	// A deferred BEGIN takes no snapshot; the first read fixes it. The clock is read between
	// the two, so every commit acknowledged before ConsistentAt precedes the snapshot.
	if _, err := srcConn.ExecContext(ctx, `BEGIN DEFERRED`); err != nil {
		return Snapshot{}, fmt.Errorf("sqlite backup: begin: %w", err)
	}
	defer func() { _, _ = srcConn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`) }()
	snap.ConsistentAt = time.Now().UTC()
	var tables int
	if err := srcConn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&tables); err != nil {
		return Snapshot{}, fmt.Errorf("sqlite backup: open the read snapshot: %w", err)
	}
	snap.SnapshotFixed = time.Now().UTC()

	err = srcConn.Raw(func(s any) error {
		return dstConn.Raw(func(d any) error {
			sc, ok1 := s.(*sqlite3.SQLiteConn)
			dc, ok2 := d.(*sqlite3.SQLiteConn)
			if !ok1 || !ok2 {
				return fmt.Errorf("sqlite backup: driver connections are %T and %T, want *sqlite3.SQLiteConn", s, d)
			}
			return copyPages(ctx, dc, sc, &snap, progress)
		})
	})
	if err != nil {
		return Snapshot{}, err
	}
	// The header copied from a WAL database says WAL; the copy is one file meant to be moved.
	if _, err := dstConn.ExecContext(ctx, `PRAGMA journal_mode=DELETE`); err != nil {
		return Snapshot{}, fmt.Errorf("sqlite backup: set the copy's journal mode: %w", err)
	}
	if err := dstConn.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&snap.PageSize); err != nil {
		return Snapshot{}, fmt.Errorf("sqlite backup: %w", err)
	}
	return snap, nil
}

// openConn opens one connection to the database file at path.
func openConn(ctx context.Context, path string, q url.Values) (*sql.Conn, func(), error) {
	db, err := sql.Open(mattn.name, fileURI(path, q))
	if err != nil {
		return nil, nil, fmt.Errorf("sqlite backup: open %s: %w", path, err)
	}
	c, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("sqlite backup: open %s: %w", path, err)
	}
	return c, func() { c.Close(); db.Close() }, nil
}

// copyPages runs the backup steps from src's main database to dst's under src's open read
// transaction.
func copyPages(ctx context.Context, dst, src *sqlite3.SQLiteConn, snap *Snapshot, progress func(copied, total int)) (err error) {
	b, err := dst.Backup("main", src, "main")
	if err != nil {
		return fmt.Errorf("sqlite backup: start: %w", err)
	}
	defer func() {
		if ferr := b.Finish(); ferr != nil && err == nil {
			err = fmt.Errorf("sqlite backup: finish: %w", ferr)
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sqlite backup: %w", err)
		}
		done, err := b.Step(backupStepPages)
		if err != nil {
			return fmt.Errorf("sqlite backup: copy pages: %w", err)
		}
		total := b.PageCount()
		snap.Pages = total
		if progress != nil {
			progress(total-b.Remaining(), total)
		}
		if done {
			return nil
		}
		if b.Remaining() == total {
			// SQLITE_BUSY or SQLITE_LOCKED on the destination: nothing copied, try again shortly.
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// Inspection is what Inspect found in a database file.
type Inspection struct {
	// Counts holds the rows of every table (SQLite's own tables left out).
	Counts        map[string]int64
	SchemaVersion int
	SQLiteVersion string
}

// ErrCorrupt is returned (wrapped) when PRAGMA integrity_check reports a problem.
var ErrCorrupt = errors.New("sqlite: integrity check failed")

// Inspect opens the database file at path read-only (it must be in rollback-journal mode, as
// Backup leaves its copies), runs PRAGMA integrity_check and counts every table's rows, in
// one read transaction.
func Inspect(ctx context.Context, path string) (Inspection, error) {
	if _, err := os.Stat(path); err != nil {
		return Inspection{}, fmt.Errorf("sqlite inspect: %w", err)
	}
	db, err := sql.Open(mattn.name, fileURI(path, url.Values{"mode": {"ro"}, "_busy_timeout": {"5000"}}))
	if err != nil {
		return Inspection{}, fmt.Errorf("sqlite inspect: open %s: %w", path, err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Inspection{}, fmt.Errorf("sqlite inspect: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var in Inspection
	if err := tx.QueryRowContext(ctx, `SELECT sqlite_version()`).Scan(&in.SQLiteVersion); err != nil {
		return Inspection{}, fmt.Errorf("sqlite inspect %s: %w", path, err)
	}
	problems, err := strings1(ctx, tx, `PRAGMA integrity_check(20)`)
	if err != nil {
		return Inspection{}, fmt.Errorf("sqlite inspect %s: integrity check: %w", path, err)
	}
	if len(problems) != 1 || problems[0] != "ok" {
		return Inspection{}, fmt.Errorf("%w: %s: %s", ErrCorrupt, path, strings.Join(problems, "; "))
	}
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&in.SchemaVersion); err != nil {
		return Inspection{}, fmt.Errorf("sqlite inspect %s: %w", path, err)
	}
	tables, err := strings1(ctx, tx, `SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return Inspection{}, fmt.Errorf("sqlite inspect %s: list tables: %w", path, err)
	}
	in.Counts = make(map[string]int64, len(tables))
	for _, t := range tables {
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM "`+strings.ReplaceAll(t, `"`, `""`)+`"`).Scan(&n); err != nil {
			return Inspection{}, fmt.Errorf("sqlite inspect %s: count %s: %w", path, t, err)
		}
		in.Counts[t] = n
	}
	return in, nil
}

// strings1 returns the first column of every row of q.
func strings1(ctx context.Context, tx *sql.Tx, q string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
