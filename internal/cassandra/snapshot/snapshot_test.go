package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/backup"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

const testKeyspace = "shop"

// shopData is what the test wrote through the shop's stores, to read back after a restore.
type shopData struct {
	now      time.Time
	products []catalog.Product
	carts    map[string][]cart.Item // user -> lines
	guests   map[string][]cart.Item // session -> lines
	sessions []session.Session
	history  []history.Entry
	events   []event.Event
}

// writeShop fills the source keyspace through the shop's Cassandra stores: catalog, user and
// guest carts, sessions, order history and click events.
func writeShop(ctx context.Context, t *testing.T, st *cassandrastore.Store) shopData {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	d := shopData{now: now, carts: map[string][]cart.Item{}, guests: map[string][]cart.Item{}}
	for i := range 24 {
		p := catalog.Product{ID: fmt.Sprintf("books-%05d", i), Name: fmt.Sprintf("Book %d", i), Category: "books",
			Price: money.Amount(1000 + 37*int64(i)), Attributes: map[string]string{"lang": "en"},
			Stock: map[string]int64{"eu-west": int64(10 + i)}, CreatedAt: now.Add(-time.Duration(i) * time.Hour), UpdatedAt: now}
		if err := st.Catalog().UpsertProduct(ctx, p); err != nil {
			t.Fatalf("upsert product %s: %v", p.ID, err)
		}
		d.products = append(d.products, p)
	}
	for u := range 12 {
		user := fmt.Sprintf("user-%02d", u)
		for l := range 1 + u%4 {
			p := d.products[(u+5*l)%len(d.products)]
			it := cart.Item{ProductID: p.ID, Category: p.Category, Quantity: int64(1 + l), AddedAt: now}
			if _, err := st.Carts().PutItem(ctx, cart.User(user), it, time.Time{}, now); err != nil {
				t.Fatalf("put item into %s's cart: %v", user, err)
			}
			d.carts[user] = append(d.carts[user], it)
		}
		e := history.Entry{UserID: user, OrderID: fmt.Sprintf("order-%02d", u), PlacedAt: now.Add(-time.Duration(u) * time.Minute),
			UpdatedAt: now, Status: order.Paid, Zone: "eu-west", Total: money.Amount(2500 + int64(u)),
			Items: []order.Item{{ProductID: d.products[u].ID, Category: "books", Name: d.products[u].Name, Quantity: 1, UnitPrice: money.Amount(2500 + int64(u))}}}
		if err := st.History().UpsertEntry(ctx, e); err != nil {
			t.Fatalf("history of %s: %v", user, err)
		}
		d.history = append(d.history, e)
	}
	for s := range 10 {
		ses := session.Session{ID: fmt.Sprintf("session-%02d", s), CreatedAt: now, LastActive: now, ExpiresAt: now.Add(24 * time.Hour),
			IP: "192.0.2.7", UserAgent: "test", Status: session.StatusActive, Data: map[string]string{"theme": fmt.Sprint(s)}}
		if s%2 == 0 {
			ses.UserID = fmt.Sprintf("user-%02d", s)
		}
		if err := st.Sessions().CreateSession(ctx, ses); err != nil {
			t.Fatalf("create session: %v", err)
		}
		d.sessions = append(d.sessions, ses)
		if s%2 == 1 {
			it := cart.Item{ProductID: d.products[s].ID, Category: "books", Quantity: 2, AddedAt: now}
			if _, err := st.Carts().PutItem(ctx, cart.Guest(ses.ID), it, ses.ExpiresAt, now); err != nil {
				t.Fatalf("guest cart: %v", err)
			}
			d.guests[ses.ID] = append(d.guests[ses.ID], it)
		}
		for e := range 3 {
			ev := event.Event{ID: fmt.Sprintf("ev-%02d-%d", s, e), Actor: "s:" + ses.ID, Type: event.View, At: now.Add(-time.Duration(e) * time.Second),
				ProductID: d.products[e].ID, Details: map[string]string{"n": fmt.Sprint(e)}}
			if err := st.Events().AppendEvent(ctx, ev); err != nil {
				t.Fatalf("append event: %v", err)
			}
			d.events = append(d.events, ev)
		}
	}
	return d
}

// checkShop reads a sample of what writeShop wrote through the shop's stores on a restored
// cluster.
func checkShop(ctx context.Context, t *testing.T, hosts []string, d shopData) {
	t.Helper()
	st, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: hosts, Keyspace: testKeyspace, ReadOnly: true})
	if err != nil {
		t.Fatalf("open the restored keyspace with the shop's store: %v", err)
	}
	defer st.Close()
	for _, user := range []string{"user-03", "user-06", "user-11"} {
		c, err := st.Carts().ActiveCart(ctx, cart.User(user), d.now)
		if err != nil {
			t.Fatalf("%s's cart: %v", user, err)
		}
		if got, want := lines(c.Items), lines(d.carts[user]); !slices.Equal(got, want) {
			t.Errorf("%s's cart: got lines %v, want %v", user, got, want)
		}
	}
	for id, want := range d.guests {
		c, err := st.Carts().ActiveCart(ctx, cart.Guest(id), d.now)
		if err != nil {
			t.Fatalf("guest cart of %s: %v", id, err)
		}
		if got := lines(c.Items); !slices.Equal(got, lines(want)) {
			t.Errorf("guest cart of %s: got %v, want %v", id, got, lines(want))
		}
	}
	for _, want := range []session.Session{d.sessions[2], d.sessions[7]} {
		got, err := st.Sessions().GetSession(ctx, want.ID, d.now)
		if err != nil {
			t.Fatalf("session %s: %v", want.ID, err)
		}
		if got.UserID != want.UserID || got.IP != want.IP || got.Data["theme"] != want.Data["theme"] || !got.ExpiresAt.Equal(want.ExpiresAt) {
			t.Errorf("session %s: got user %q ip %s data %v expires %s, want user %q ip %s data %v expires %s", want.ID,
				got.UserID, got.IP, got.Data, got.ExpiresAt, want.UserID, want.IP, want.Data, want.ExpiresAt)
		}
	}
	h, err := st.History().ListHistory(ctx, "user-04", paging.Request{Limit: 10})
	if err != nil {
		t.Fatalf("history: %v", err)
	}
	if want := d.history[4]; len(h.Items) != 1 || h.Items[0].OrderID != want.OrderID || h.Items[0].Total != want.Total || len(h.Items[0].Items) != 1 {
		t.Errorf("history of user-04: got %+v, want one entry %s total %s", h.Items, want.OrderID, want.Total)
	}
	evs, err := st.Events().ListEvents(ctx, event.Query{Actor: "s:session-05", Day: d.now, Page: paging.Request{Limit: 10}})
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	if len(evs.Items) != 3 || evs.Items[0].ID != "ev-05-0" {
		t.Errorf("events of session-05: got %d (%+v), want 3, newest ev-05-0", len(evs.Items), evs.Items)
	}
	p, err := st.Catalog().GetProduct(ctx, "books-00017")
	if err != nil {
		t.Fatalf("product: %v", err)
	}
	if want := d.products[17]; p.Price != want.Price || p.Stock["eu-west"] != want.Stock["eu-west"] || p.Name != want.Name {
		t.Errorf("product books-00017: got %s %s stock %v, want %s %s stock %v", p.Name, p.Price, p.Stock, want.Name, want.Price, want.Stock)
	}
}

func lines(items []cart.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, fmt.Sprintf("%s x%d", it.ProductID, it.Quantity))
	}
	slices.Sort(out)
	return out
}

// TestBackupAndRestore backs up the 3-node source, kills a second backup mid-way, then
// restores the first into a 1-node and a fresh 3-node cluster at once.
func TestBackupAndRestore(t *testing.T) {
	// Generous: on a 2-core machine at a load average of 60 the two restores took 5 minutes each.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	src := source.Need(t)
	if _, err := cassandrastore.ApplySchema(ctx, src.Hosts(), cassandrastore.SchemaOptions{Keyspace: testKeyspace, RF: 3}); err != nil {
		t.Fatalf("apply the shop's schema: %v", err)
	}
	st, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: src.Hosts(), Keyspace: testKeyspace})
	if err != nil {
		t.Fatalf("open the shop's store: %v", err)
	}
	data := writeShop(ctx, t, st)
	st.Close()

	dir := filepath.Join(t.TempDir(), "backup")
	var m backup.Manifest
	t.Run("backup", func(t *testing.T) {
		var out progressLog
		t0 := time.Now()
		m, err = Backup(ctx, BackupOptions{Conn: Conn{Hosts: src.Hosts()}, Keyspace: testKeyspace, Nodes: LocalNodes(src), Out: dir, Progress: &out})
		t.Logf("backup in %s, load %s:\n%s", time.Since(t0).Round(time.Millisecond), loadavg(), out.String())
		if err != nil {
			t.Fatalf("backup: %v", err)
		}
		// user_carts: a row per line (30) and the cart's own row per user (12).
		want := map[string]int64{"products": 24, "user_carts": 42, "sessions": 10, "order_history": 12, "user_events": 30}
		for table, n := range want {
			if m.Counts[table] != n {
				t.Errorf("manifest counts %s = %d, want %d", table, m.Counts[table], n)
			}
		}
		if m.Meta[metaCountsAfter] != "" {
			t.Errorf("counts moved during a backup nothing wrote to: %s", m.Meta[metaCounts])
		}
		snaps := nodeSnapshots(t, m)
		if len(snaps) != 3 {
			t.Fatalf("manifest names %d nodes, want 3", len(snaps))
		}
		for _, sn := range snaps {
			if len(sn.Tokens) != 1 || sn.Tables == 0 || sn.ConsistentAt.After(sn.Done) || sn.ConsistentAt.Before(m.ConsistentAt) {
				t.Errorf("node %+v: want one token, tables, and asked at or after consistent_at %s, before done", sn, m.ConsistentAt)
			}
			for _, f := range []string{"user_carts/schema.cql", "user_carts/manifest.json"} {
				if _, err := os.Stat(filepath.Join(dir, sn.Addr, f)); err != nil {
					t.Errorf("node %s: %v", sn.Addr, err)
				}
			}
		}
		if left := snapshotDirs(t, src, m.Meta[metaTag]); len(left) > 0 {
			t.Errorf("snapshot %s not cleared from the nodes: %v", m.Meta[metaTag], left)
		}
		if _, err := backup.Verify(dir); err != nil {
			t.Errorf("verify: %v", err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Run("killed backup has no manifest and restore refuses it", func(t *testing.T) {
		testKilledBackup(ctx, t, src)
	})
	stopCluster(t, source)

	t.Run("restore", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			cluster *launcher.Shared
			rf      int
		}{{"one node", target1, 1}, {"three fresh nodes", target3, 3}} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				defer stopCluster(t, tc.cluster)
				c := tc.cluster.Need(t)
				var out progressLog
				t0 := time.Now()
				res, err := Restore(ctx, RestoreOptions{Conn: Conn{Hosts: c.Hosts()}, Dir: dir, Progress: &out})
				t.Logf("restore in %s, load %s:\n%s", time.Since(t0).Round(time.Millisecond), loadavg(), out.String())
				if err != nil {
					t.Fatalf("restore: %v", err)
				}
				if got := res.Replication["datacenter1"]; got != tc.rf || len(res.Replication) != 1 {
					t.Errorf("replication %v, want datacenter1: %d", res.Replication, tc.rf)
				}
				if err := backup.CheckCounts(m, res.Loaded); err != nil {
					t.Errorf("counts: %v", err)
				}
				checkShop(ctx, t, c.Hosts(), data)
				_, err = Restore(ctx, RestoreOptions{Conn: Conn{Hosts: c.Hosts()}, Dir: dir})
				if !errors.Is(err, ErrNotEmpty) {
					t.Errorf("second restore into the same keyspace: got %v, want ErrNotEmpty", err)
				}
			})
		}
	})
}

// snapshotDirs lists the snapshot tag's directories left on the cluster's nodes.
func snapshotDirs(t *testing.T, c *launcher.Cluster, tag string) []string {
	t.Helper()
	var left []string
	for _, n := range c.Nodes() {
		m, err := filepath.Glob(filepath.Join(n.DataDir(), "data", testKeyspace, "*", "snapshots", tag))
		if err != nil {
			t.Fatal(err)
		}
		left = append(left, m...)
	}
	return left
}

// The child process of testKilledBackup: a backup whose copy of the second node blocks until
// the parent SIGKILLs the process.
const (
	killChildEnv = "SNAPSHOT_TEST_KILLED_BACKUP"
	killTag      = "killed-backup"
)

func testKilledBackup(ctx context.Context, t *testing.T, src *launcher.Cluster) {
	work := t.TempDir()
	out, marker := filepath.Join(work, "backup"), filepath.Join(work, "copying")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), killChildEnv+"="+src.Dir()+"|"+out+"|"+marker)
	var stderr progressLog
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		if ctx.Err() != nil {
			_ = cmd.Process.Kill()
			t.Fatalf("the backup never reached its second node: %s", stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := os.Stat(filepath.Join(out, "127.0.0.171", "user_carts")); err != nil {
		t.Errorf("the killed backup had copied its first node: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out, backup.ManifestName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("killed backup: manifest stat: got %v, want none", err)
	}
	_, err := Restore(ctx, RestoreOptions{Conn: Conn{Hosts: src.Hosts()}, Dir: out})
	if !errors.Is(err, backup.ErrIncomplete) {
		t.Errorf("restore of a killed backup: got %v, want ErrIncomplete", err)
	}
	// A killed backup leaves its snapshot on the nodes until it is cleared by hand.
	if left := snapshotDirs(t, src, killTag); len(left) == 0 {
		t.Errorf("the killed backup's snapshot %s is on no node", killTag)
	}
	for _, n := range LocalNodes(src) {
		if err := n.ClearSnapshot(ctx, testKeyspace, killTag); err != nil {
			t.Errorf("clear: %v", err)
		}
	}
	if left := snapshotDirs(t, src, killTag); len(left) > 0 {
		t.Errorf("after clearsnapshot: %v", left)
	}
}

// killChild runs the backup the parent kills; it returns the exit code.
func killChild() int {
	args := strings.Split(os.Getenv(killChildEnv), "|")
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "want cluster dir|backup dir|marker file")
		return 2
	}
	clusterDir, out, marker := args[0], args[1], args[2]
	c, err := launcher.Open(clusterDir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	nodes := LocalNodes(c)
	nodes[1] = blockingCopy{Node: nodes[1], marker: marker}
	_, err = Backup(context.Background(), BackupOptions{Conn: Conn{Hosts: c.Hosts()}, Keyspace: testKeyspace, Nodes: nodes, Out: out, Tag: killTag, Progress: os.Stderr})
	fmt.Fprintln(os.Stderr, "backup returned", err)
	return 1
}

// blockingCopy marks that the copy of its node began and then waits to be killed.
type blockingCopy struct {
	Node
	marker string
}

func (b blockingCopy) CopySnapshot(ctx context.Context, _, _, _ string) error {
	if err := os.WriteFile(b.marker, nil, 0o600); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

func nodeSnapshots(t *testing.T, m backup.Manifest) []NodeSnapshot {
	t.Helper()
	var snaps []NodeSnapshot
	if err := json.Unmarshal([]byte(m.Meta[metaNodes]), &snaps); err != nil {
		t.Fatalf("manifest nodes: %v", err)
	}
	return snaps
}

func TestCheckCounts(t *testing.T) {
	exact := backup.Manifest{Counts: map[string]int64{"a": 10, "b": 5}}
	moved := backup.Manifest{Counts: map[string]int64{"a": 10, "b": 5}, Meta: map[string]string{metaCountsAfter: `{"a":14,"b":5}`}}
	for _, tc := range []struct {
		name   string
		m      backup.Manifest
		loaded map[string]int64
		ok     bool
	}{
		{"exact match", exact, map[string]int64{"a": 10, "b": 5}, true},
		{"exact, one row short", exact, map[string]int64{"a": 9, "b": 5}, false},
		{"exact, a table missing", exact, map[string]int64{"a": 10}, false},
		{"moved, between before and after", moved, map[string]int64{"a": 12, "b": 5}, true},
		{"moved, above after", moved, map[string]int64{"a": 15, "b": 5}, false},
		{"moved, unmoved table differs", moved, map[string]int64{"a": 12, "b": 6}, false},
	} {
		err := checkCounts(tc.m, tc.loaded)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, backup.ErrMismatch)) {
			t.Errorf("%s: got %v, want ok=%v (else ErrMismatch)", tc.name, err, tc.ok)
		}
	}
}

func TestSplitStatementsAndIfNotExists(t *testing.T) {
	got := splitStatements("CREATE TYPE ks.t (a text);\n\nCREATE TABLE ks.x (k text PRIMARY KEY) WITH comment = 'a; b';\n")
	want := []string{"CREATE TYPE ks.t (a text)", "CREATE TABLE ks.x (k text PRIMARY KEY) WITH comment = 'a; b'"}
	if !slices.Equal(got, want) {
		t.Fatalf("split: got %q, want %q", got, want)
	}
	if got := ifNotExists(want[1]); got != "CREATE TABLE IF NOT EXISTS ks.x (k text PRIMARY KEY) WITH comment = 'a; b'" {
		t.Errorf("ifNotExists: got %q", got)
	}
}

// progressLog collects progress lines from several goroutines.
type progressLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (p *progressLog) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b.Write(b)
}

func (p *progressLog) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b.String()
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}
