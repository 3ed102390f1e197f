package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardmart/shardmart/internal/backup"
	"github.com/shardmart/shardmart/internal/mongodb/dump"
)

// The backups and restores themselves run against real replica sets in internal/mongodb/dump;
// these cover the commands' surface, and the refusals that come before any connection.

func runBackupCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, errOut, err := execRoot(t, args...)
	return out + errOut, err
}

func TestBackupMongoTakesTheDeploymentEnvironment(t *testing.T) {
	t.Setenv("SHARDMART_MONGO_URI", "mongodb://env-host:27017/?replicaSet=rs0")
	t.Setenv("SHARDMART_MONGO_DB", "envdb")
	for verb, dirFlag := range map[string]string{"backup": "--out", "restore": "--from"} {
		var got mongoBackupOptions
		root := newRootCmd(IO{})
		stub := func(_ context.Context, o mongoBackupOptions) error { got = o; return nil }
		if verb == "backup" {
			root.AddCommand(newCmdBackupMongo(IO{}, stub))
		} else {
			root.AddCommand(newCmdRestoreMongo(IO{}, stub))
		}
		root.SetArgs([]string{"mongo", dirFlag, "/backups/x"})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if got.URI != "mongodb://env-host:27017/?replicaSet=rs0" || got.Database != "envdb" || got.Dir != "/backups/x" {
			t.Errorf("%s mongo: options %+v, want the URI and database from the environment and the directory flag", verb, got)
		}
	}
}

func TestRestoreMongoRefusesABackupThatIsNotExactlyAsSealed(t *testing.T) {
	// Nothing listens here: the refusals must come before any connection.
	const uri = "mongodb://127.0.0.1:1/?replicaSet=none&serverSelectionTimeoutMS=500"
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "shop"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "shop", "orders.bson"), []byte{5, 0, 0, 0, 0}, 0o640); err != nil {
		t.Fatal(err)
	}
	incomplete := filepath.Join(t.TempDir(), "killed")
	if err := os.CopyFS(incomplete, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Seal(dir, backup.Manifest{Store: dump.StoreName, Source: "shop", Counts: map[string]int64{"orders": 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := runBackupCmd(t, "restore", "mongo", "--mongo-uri", uri, "--from", incomplete); !errors.Is(err, backup.ErrIncomplete) {
		t.Errorf("restore of a backup without a manifest: %v, want ErrIncomplete", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "shop", "orders.bson"), []byte{5, 0, 0, 0, 1}, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err := runBackupCmd(t, "restore", "mongo", "--mongo-uri", uri, "--from", dir)
	if !errors.Is(err, backup.ErrMismatch) || !strings.Contains(err.Error(), "orders.bson") {
		t.Errorf("restore of a backup with a changed byte: %v, want ErrMismatch naming orders.bson", err)
	}
	if _, err := runBackupCmd(t, "backup", "mongo", "--mongo-uri", uri, "--out", dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("backup into a directory that holds a backup: %v, want a refusal", err)
	}
	if _, err := runBackupCmd(t, "backup", "mongo", "--mongo-uri", uri, "--at-cluster-time", "yesterday", "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), "--at-cluster-time") {
		t.Errorf("backup with an unreadable --at-cluster-time: %v, want an error naming the flag", err)
	}
}
