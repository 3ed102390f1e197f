package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/backup"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// sqliteBackupFile is the copy's name inside a backup directory, the same as in a data
// directory.
const sqliteBackupFile = "shardmart.db"

type backupSQLiteOptions struct {
	dataDir string
	out     string
}

// newCmdBackupSQLite builds `backup sqlite`; runF, if not nil, replaces runBackupSQLite (tests).
func newCmdBackupSQLite(stdio IO, runF func(context.Context, backupSQLiteOptions) error) *cobra.Command {
	var o backupSQLiteOptions
	cmd := &cobra.Command{
		Use:   "sqlite",
		Short: "Copy the embedded store online (serve may keep running) into an empty directory, check it and seal it",
		Long: `Copies the embedded store's database with SQLite's online backup API, inside one read
transaction, while serve keeps running on it; runs PRAGMA integrity_check on the copy, counts its
rows per table, and writes manifest.json last (file sizes and SHA-256, consistent_at, the counts).
Every order acknowledged before consistent_at is in the backup.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOrRunF(cmd.Context(), stdio, o, runBackupSQLite, runF)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "data-dir", "./data", "directory of the embedded store to back up")
	f.StringVar(&o.out, "out", "", "directory to write the backup into: created if missing, refused unless empty (required)")
	fromEnv(f, "data-dir", "SHARDMART_DATA_DIR")
	return cmd
}

func runBackupSQLite(ctx context.Context, stdio IO, o backupSQLiteOptions) (err error) {
	if o.out == "" {
		return errors.New("--out is required: an empty directory for the backup")
	}
	src, err := filepath.Abs((&backendFlags{dataDir: o.dataDir}).sqlitePath())
	if err != nil {
		return err
	}
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("no embedded store to back up in %s: %w", o.dataDir, err)
	}
	if err := backup.EmptyDir(o.out); err != nil {
		return err
	}
	dst := filepath.Join(o.out, sqliteBackupFile)
	defer func() {
		// A failed backup leaves its directory empty, not holding a copy without a manifest.
		if err != nil {
			_ = os.Remove(dst)
			_ = os.Remove(dst + "-journal")
		}
	}()
	started := time.Now().UTC()
	fmt.Fprintf(stdio.Out, "backing up %s into %s\n", src, o.out)
	lastTenth := -1
	snap, err := sqlitestore.Backup(ctx, src, dst, func(copied, total int) {
		if tenth := copied * 10 / max(total, 1); tenth > lastTenth {
			lastTenth = tenth
			fmt.Fprintf(stdio.Out, "  copied %d/%d pages (%d%%)\n", copied, total, copied*100/max(total, 1))
		}
	})
	if err != nil {
		return err
	}
	// The copy holds password hashes and session keys: no wider access than the store's own.
	if err := os.Chmod(dst, 0o640); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(stdio.Out, "  consistent at %s; checking the copy (PRAGMA integrity_check, row counts)\n", snap.ConsistentAt.Format(time.RFC3339Nano))
	in, err := sqlitestore.Inspect(ctx, dst)
	if err != nil {
		return fmt.Errorf("the copy failed its check, nothing was sealed: %w", err)
	}
	if err := backup.SyncTree(o.out); err != nil {
		return fmt.Errorf("sync %s: %w", o.out, err)
	}
	m, err := backup.Seal(o.out, backup.Manifest{
		Store:        "sqlite",
		ConsistentAt: snap.ConsistentAt,
		Started:      started,
		Source:       src,
		Counts:       in.Counts,
		Meta: map[string]string{
			"sqlite_version": snap.SQLiteVersion,
			"schema_version": strconv.Itoa(in.SchemaVersion),
			"page_size":      strconv.FormatInt(snap.PageSize, 10),
			"pages":          strconv.Itoa(snap.Pages),
			"snapshot_fixed": snap.SnapshotFixed.Format(time.RFC3339Nano),
		},
	})
	if err != nil {
		return err
	}
	var bytes, rows int64
	for _, f := range m.Files {
		bytes += f.Bytes
	}
	for _, n := range m.Counts {
		rows += n
	}
	fmt.Fprintf(stdio.Out, "sealed %s: %s, %d tables, %d rows (orders %d, products %d, users %d), consistent at %s, took %s\n",
		filepath.Join(o.out, backup.ManifestName), mib(bytes), len(m.Counts), rows, m.Counts["orders"], m.Counts["products"], m.Counts["users"],
		m.ConsistentAt.Format(time.RFC3339Nano), m.Finished.Sub(started).Round(time.Millisecond))
	return nil
}

type restoreSQLiteOptions struct {
	from    string
	dataDir string
}

// newCmdRestoreSQLite builds `restore sqlite`; runF, if not nil, replaces runRestoreSQLite (tests).
func newCmdRestoreSQLite(stdio IO, runF func(context.Context, restoreSQLiteOptions) error) *cobra.Command {
	var o restoreSQLiteOptions
	cmd := &cobra.Command{
		Use:   "sqlite",
		Short: "Restore a `backup sqlite` directory into an empty data directory, verified against its manifest",
		Long: `Verifies every file of the backup against its manifest (a backup without a manifest, one
that did not finish, is refused), copies the database into the empty data directory under a
temporary name, runs PRAGMA integrity_check on it and compares its row counts with the manifest,
and only then renames it to shardmart.db: a restore that fails leaves no store that serve would
start on. Exits non-zero on any difference.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOrRunF(cmd.Context(), stdio, o, runRestoreSQLite, runF)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.from, "from", "", "backup directory written by `shardmart backup sqlite` (required)")
	f.StringVar(&o.dataDir, "data-dir", "./data", "data directory to restore into: created if missing, refused unless empty")
	fromEnv(f, "data-dir", "SHARDMART_DATA_DIR")
	return cmd
}

func runRestoreSQLite(ctx context.Context, stdio IO, o restoreSQLiteOptions) (err error) {
	if o.from == "" {
		return errors.New("--from is required: the backup directory")
	}
	if err := backup.EmptyDir(o.dataDir); err != nil {
		return fmt.Errorf("restore into %s: %w", o.dataDir, err)
	}
	// Held for the restore, so a serve started meanwhile on this directory is refused; the lock
	// file goes too, leaving only the restored database (or, on failure, nothing).
	release, err := lockDataDir(o.dataDir)
	if err != nil {
		return err
	}
	defer func() {
		_ = os.Remove(filepath.Join(o.dataDir, lockFile))
		release()
	}()
	start := time.Now()
	fmt.Fprintf(stdio.Out, "verifying %s against its manifest\n", o.from)
	m, err := backup.Verify(o.from)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if m.Store != "sqlite" {
		return fmt.Errorf("restore from %s: a backup of the %q store, not of the embedded one (sqlite)", o.from, m.Store)
	}
	i := slices.IndexFunc(m.Files, func(f backup.File) bool { return f.Path == sqliteBackupFile })
	if i < 0 || len(m.Files) != 1 {
		return fmt.Errorf("restore from %s: %w: want exactly one file, %s; the manifest lists %d", o.from, backup.ErrMismatch, sqliteBackupFile, len(m.Files))
	}
	want := m.Files[i]
	final := (&backendFlags{dataDir: o.dataDir}).sqlitePath()
	tmp := final + ".restoring"
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	fmt.Fprintf(stdio.Out, "  copying %s (%s, consistent at %s) into %s\n", sqliteBackupFile, mib(want.Bytes), m.ConsistentAt.Format(time.RFC3339Nano), o.dataDir)
	sum, err := copySynced(filepath.Join(o.from, sqliteBackupFile), tmp)
	if err != nil {
		return fmt.Errorf("restore: copy the database: %w", err)
	}
	// Hashed again as copied: a change after Verify read it is caught too.
	if sum != want.SHA256 {
		return fmt.Errorf("restore: %w: %s copied with sha256 %s, manifest says %s", backup.ErrMismatch, sqliteBackupFile, sum, want.SHA256)
	}
	fmt.Fprintln(stdio.Out, "  checking the restored database (PRAGMA integrity_check, row counts against the manifest)")
	in, err := sqlitestore.Inspect(ctx, tmp)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := backup.CheckCounts(m, in.Counts); err != nil {
		return fmt.Errorf("restore: row counts: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := backup.SyncTree(o.dataDir); err != nil {
		return fmt.Errorf("restore: sync %s: %w", o.dataDir, err)
	}
	fmt.Fprintf(stdio.Out, "restored %s: %d tables, orders %d, products %d, users %d, as of %s; took %s\n",
		final, len(in.Counts), in.Counts["orders"], in.Counts["products"], in.Counts["users"],
		m.ConsistentAt.Format(time.RFC3339Nano), time.Since(start).Round(time.Millisecond))
	return nil
}

// copySynced copies src to the new file dst, fsyncs it and returns its SHA-256 in hex.
func copySynced(src, dst string) (string, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(out, h), in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
