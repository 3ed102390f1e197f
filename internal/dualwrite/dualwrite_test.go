package dualwrite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/serverproc"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// A hung Cassandra (its only node SIGSTOPped) holds up neither a phase change of the history
// family nor a history read, while the dual write's copy of an entry into it hangs: the copy
// runs after the phase is released. Once the node runs again, the projector's retry lands.
func TestDualWriteHungTargetBlocksNoPhaseChange(t *testing.T) {
	c := launcher.ForTest(t, launcher.Options{Nodes: 1, BaseAddr: launcher.DualWriteTestAddr, HeapMB: 512})
	ctx := context.Background()
	const ks = "dualwrite_hung"
	if _, err := cassandrastore.ApplySchema(ctx, c.Hosts(), cassandrastore.SchemaOptions{Keyspace: ks, RF: 1}); err != nil {
		t.Fatalf("apply schema: %v", err)
	}
	var m *Layer
	o := placement.Options{SQLitePath: filepath.Join(t.TempDir(), "shop.db"), CassandraHosts: c.Hosts(), CassandraKeyspace: ks}
	o.Wrap = func(ctx context.Context, s *placement.Stores, cfg placement.Config) (err error) {
		m, err = Wrap(ctx, s, cfg, o)
		return err
	}
	s, err := placement.Open(ctx, placement.Embedded(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: c.Hosts(), Keyspace: ks})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dst := migrate.NewTarget(st.Session())
	if err := dst.SetState(ctx, migrate.PhaseNone, migrate.State{Family: migrate.History, Phase: migrate.DualWrite, Source: migrate.FromSQLite, Run: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := m.RefreshMigrations(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	if p := m.MigrationPhases()[family.History]; p != migrate.DualWrite {
		t.Fatalf("history applies phase %q, want %q", p, migrate.DualWrite)
	}
	entry := func(id string) history.Entry {
		now := time.Now().UTC().Truncate(time.Millisecond)
		return history.Entry{UserID: "u1", OrderID: id, PlacedAt: now, UpdatedAt: now, Status: order.Paid, Zone: "eu-west", Total: money.Amount(1250),
			Items: []order.Item{{ProductID: "p1", Category: "books", Name: "A book", Quantity: 1, UnitPrice: 1250}}}
	}
	if err := s.History.UpsertEntry(ctx, entry("o-before")); err != nil {
		t.Fatalf("dual write with Cassandra up: %v", err)
	}

	pid := cassandraPID(t, c)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// kill returns before the JVM's threads have stopped (each stops when next scheduled, a
	// while on a loaded machine): wait until all have, so no request is answered after this.
	eventually.NoError(t, time.Minute, func() error { return serverproc.Stopped(pid) })
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT %d: %v", pid, err)
			}
		}
	}
	t.Cleanup(resume)

	hung := entry("o-hung")
	upserted := make(chan error, 1)
	go func() { upserted <- s.History.UpsertEntry(ctx, hung) }()
	// The old store took the entry: the copy into the stopped node is under way.
	eventually.True(t, time.Minute, "the entry in the old store", func() bool {
		return hasEntry(t, ctx, s.History, hung.OrderID)
	})

	// A phase change and a read, each while the copy still hangs.
	ph := m.phases[family.History]
	changed := make(chan struct{})
	go func() { ph.set(migrate.Copied); close(changed) }()
	select {
	case <-changed:
	case err := <-upserted:
		t.Fatalf("the phase change waited for the hung copy (which ended with %v; node stopped: %v)", err, stoppedOrWhy(pid))
	case <-time.After(2 * time.Minute):
		t.Fatal("the phase change did not happen in 2 min")
	}
	read := make(chan bool, 1)
	go func() { read <- hasEntry(t, ctx, s.History, hung.OrderID) }()
	select {
	case ok := <-read:
		if !ok {
			t.Fatal("the history read after the phase change misses the entry")
		}
	case err := <-upserted:
		t.Fatalf("the history read waited for the hung copy (which ended with %v)", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the history read did not answer in 2 min")
	}
	select {
	case err := <-upserted:
		t.Fatalf("the copy into a stopped node ended before the phase change was checked (%v): nothing was shown", err)
	default:
	}

	// The copy is bounded: it ends with an error while the node is stopped (the driver's
	// request timeout, under copyTimeout), and the projector's retry lands once it runs again.
	select {
	case err := <-upserted:
		if err == nil {
			t.Fatal("the copy into a stopped node reported success")
		}
		t.Logf("the hung copy ended with: %v", err)
	case <-time.After(copyTimeout + time.Minute):
		t.Fatalf("the copy into a stopped node did not end within copyTimeout (%s) and a minute", copyTimeout)
	}
	resume()
	eventually.True(t, 2*time.Minute, "the retried copy to land", func() bool {
		return s.History.UpsertEntry(ctx, hung) == nil
	})
	page, err := st.History().ListHistory(ctx, "u1", paging.Request{Limit: 10})
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("Cassandra's history of u1 after the retry: %v, %d entries, want 2", err, len(page.Items))
	}
}

func hasEntry(t *testing.T, ctx context.Context, h history.Repository, orderID string) bool {
	page, err := h.ListHistory(ctx, "u1", paging.Request{Limit: 10})
	if err != nil {
		t.Errorf("list history: %v", err)
		return false
	}
	for _, e := range page.Items {
		if e.OrderID == orderID {
			return true
		}
	}
	return false
}

func stoppedOrWhy(pid int) string {
	if err := serverproc.Stopped(pid); err != nil {
		return err.Error()
	}
	return "yes"
}

// cassandraPID is the JVM of the cluster's only node, from the pidfile the launcher writes.
func cassandraPID(t *testing.T, c *launcher.Cluster) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Nodes()[0].Dir, "cassandra.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(fmt.Errorf("pidfile: %w", err))
	}
	return pid
}

// The layer wraps exactly the families internal/family says move to Cassandra, and to
// MongoDB with dual writes: a family without a wrapgen entry (or a hand-written wrapper) is
// missing here.
func TestEveryMigratingFamilyHasAWrapper(t *testing.T) {
	for _, tc := range []struct {
		to   string
		want []family.Name
		got  int
		has  func(family.Name) bool
	}{
		{"cassandra", family.ToCassandra(), len(wrappers), func(f family.Name) bool { return wrappers[f] != nil }},
		{"mongo", family.ToMongoDualWrite(), len(mongoWrappers), func(f family.Name) bool { return mongoWrappers[f] != nil }},
	} {
		if tc.got != len(tc.want) {
			t.Errorf("%d wrappers for %d families migrating to %s", tc.got, len(tc.want), tc.to)
		}
		for _, f := range tc.want {
			if !tc.has(f) {
				t.Errorf("family %s migrates to %s but has no dual-write wrapper", f, tc.to)
			}
		}
	}
}
