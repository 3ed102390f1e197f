package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
)

// TestBackupIsOneSnapshotWhileOrdersCommit copies a database of several backup steps while
// another connection places orders without pause. The copy passes the integrity check and holds
// every order acknowledged before ConsistentAt; an order committed between two steps of the copy
// is not in it (the copy is one snapshot, not restarted by the writes); stock and orders agree
// in the copy; and the copy is one file in rollback-journal mode.
func TestBackupIsOneSnapshotWhileOrdersCommit(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "live.db")
	db, err := Open(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const stock = 1_000_000
	// Long descriptions make the file span several backup steps.
	ps := []catalog.Product{{ID: "p", Name: "P", Category: "c", Price: money.MustParse("1.00"), Stock: map[string]int64{"eu": stock}}}
	for i := range 2500 {
		ps = append(ps, catalog.Product{ID: fmt.Sprintf("filler-%04d", i), Name: "Filler", Category: "f",
			Description: strings.Repeat("x", 4000), Price: money.MustParse("1.00"), Stock: map[string]int64{"eu": 1}})
	}
	if err := db.Products().CreateProducts(ctx, ps); err != nil {
		t.Fatal(err)
	}
	place := func(id string) error {
		_, _, err := db.Orders().Place(ctx, order.Placement{OrderID: id, UserID: "u", CartID: "c" + id, CartOwner: "u:u",
			Zone: "eu", IdempotencyKey: id, Lines: []order.Line{{ProductID: "p", Category: "c", Quantity: 1}}, At: time.Now()})
		return err
	}

	type ack struct {
		id string
		at time.Time
	}
	var (
		mu     sync.Mutex
		acks   []ack
		stop   = make(chan struct{})
		writer sync.WaitGroup
	)
	writer.Add(1)
	go func() {
		defer writer.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("o%06d", i)
			if err := place(id); err != nil {
				t.Errorf("place %s: %v", id, err)
				return
			}
			mu.Lock()
			acks = append(acks, ack{id, time.Now()})
			mu.Unlock()
		}
	}()
	// Let some orders in first, so the copy has some before and some after its snapshot.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(acks)
		mu.Unlock()
		if n >= 50 || time.Now().After(deadline) {
			break
		}
	}

	dst := filepath.Join(t.TempDir(), "copy.db")
	steps := 0
	const between = "between-steps"
	snap, err := Backup(ctx, src, dst, func(copied, total int) {
		steps++
		if steps == 1 {
			if err := place(between); err != nil {
				t.Errorf("place an order between two steps: %v", err)
			}
		}
	})
	close(stop)
	writer.Wait()
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if steps < 2 {
		t.Fatalf("the copy took %d step(s) of %d pages (%d pages in all); the test needs several", steps, backupStepPages, snap.Pages)
	}
	if snap.ConsistentAt.After(snap.SnapshotFixed) || snap.SQLiteVersion == "" || snap.PageSize == 0 {
		t.Errorf("snapshot = %+v", snap)
	}
	in, err := Inspect(ctx, dst)
	if err != nil {
		t.Fatalf("inspect the copy: %v", err)
	}
	cp, err := Open(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	before := 0
	for _, a := range acks {
		if !a.at.Before(snap.ConsistentAt) {
			continue
		}
		before++
		if _, err := cp.Orders().GetOrder(ctx, a.id); err != nil {
			t.Fatalf("order %s acknowledged %s before consistent_at is not in the copy: %v", a.id, snap.ConsistentAt.Sub(a.at), err)
		}
	}
	if _, err := cp.Orders().GetOrder(ctx, between); !errors.Is(err, order.ErrNotFound) {
		t.Errorf("the order committed between two steps of the copy: %v, want not found", err)
	}
	p, err := cp.Products().GetProduct(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if got := in.Counts["orders"]; got < int64(before) || p.Stock["eu"] != stock-got || in.Counts["outbox"] < got {
		t.Errorf("copy: %d orders (%d acknowledged before consistent_at), stock %d, outbox %d; want stock %d",
			got, before, p.Stock["eu"], in.Counts["outbox"], stock-got)
	}
	if in.Counts["products"] != int64(len(ps)) || in.SchemaVersion != len(upgrades) {
		t.Errorf("inspection = %d products, schema %d; want %d, %d", in.Counts["products"], in.SchemaVersion, len(ps), len(upgrades))
	}
	t.Logf("%d pages in %d steps; %d of %d acknowledged orders before consistent_at, %d in the copy",
		snap.Pages, steps, before, len(acks), in.Counts["orders"])
}

// TestBackupCopyIsOneFile: the copy is in rollback-journal mode with nothing beside it, so it
// can be hashed and moved as a single file.
func TestBackupCopyIsOneFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(ctx, filepath.Join(dir, "live.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := t.TempDir()
	dst := filepath.Join(out, "copy.db")
	if _, err := Backup(ctx, filepath.Join(dir, "live.db"), dst, nil); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Errorf("backup directory holds %d entries, want only the copy", len(ents))
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	// Bytes 18 and 19 of the header are 1 in rollback-journal mode, 2 in WAL mode.
	if b[18] != 1 || b[19] != 1 {
		t.Errorf("copy header read/write versions %d/%d, want 1/1 (rollback journal)", b[18], b[19])
	}
	if _, err := Backup(ctx, filepath.Join(dir, "live.db"), dst, nil); err == nil {
		t.Error("a backup over an existing file was taken")
	}
	if _, err := Backup(ctx, filepath.Join(dir, "missing.db"), filepath.Join(out, "other.db"), nil); err == nil {
		t.Error("a backup of a missing database was taken")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); err == nil {
		t.Error("backing up a missing database created it")
	}
}
