package backup

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSealThenVerify(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "db"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "db", "orders.bson"), []byte("orders"), 0o640); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	if _, err := Seal(dir, Manifest{Store: "mongo", ConsistentAt: at, Counts: map[string]int64{"orders": 1}}); err != nil {
		t.Fatal(err)
	}
	m, err := Verify(dir)
	if err != nil {
		t.Fatalf("verify a sealed backup: %v", err)
	}
	if !m.ConsistentAt.Equal(at) || len(m.Files) != 1 || m.Files[0].Path != "db/orders.bson" || m.Files[0].Bytes != 6 {
		t.Fatalf("manifest = %+v", m)
	}
	if err := CheckCounts(m, map[string]int64{"orders": 1}); err != nil {
		t.Fatalf("equal counts: %v", err)
	}
	if err := CheckCounts(m, map[string]int64{"orders": 0}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("a short count: %v, want ErrMismatch", err)
	}
	if err := CheckCounts(m, map[string]int64{"orders": 1, "users": 3}); !errors.Is(err, ErrMismatch) {
		t.Fatalf("an extra collection: %v, want ErrMismatch", err)
	}

	// A changed byte, an added file and a removed file are each caught.
	if err := os.WriteFile(filepath.Join(dir, "db", "orders.bson"), []byte("ordert"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); !errors.Is(err, ErrMismatch) {
		t.Fatalf("changed file: %v, want ErrMismatch", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "db", "orders.bson"), []byte("orders"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stray"), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); !errors.Is(err, ErrMismatch) {
		t.Fatalf("extra file: %v, want ErrMismatch", err)
	}
	if err := os.Remove(filepath.Join(dir, "stray")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "db", "orders.bson")); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(dir); !errors.Is(err, ErrMismatch) {
		t.Fatalf("missing file: %v, want ErrMismatch", err)
	}
}

func TestUnsealedBackupIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "shop.db"), []byte("half"), 0o640); err != nil {
		t.Fatal(err)
	}
	// A manifest.json.tmp is what a kill between the write and the rename leaves.
	if err := os.WriteFile(filepath.Join(dir, ManifestName+".tmp"), []byte("{}"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("open: %v, want ErrIncomplete", err)
	}
	if _, err := Verify(dir); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("verify: %v, want ErrIncomplete", err)
	}
}

func TestEmptyDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	if err := EmptyDir(dir); err != nil {
		t.Fatalf("a missing directory is made: %v", err)
	}
	if err := EmptyDir(dir); err != nil {
		t.Fatalf("an empty directory is taken: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := EmptyDir(dir); err == nil {
		t.Fatal("a non-empty directory was taken")
	}
}
