package migrate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/google/uuid"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// The tests copy a real SQLite file into a real one-node Cassandra that TestMain starts on
// launcher.MigrateTestAddr. The resume test re-executes this binary as the killed backfill
// (helperEnv set): that child uses the parent's cluster instead of starting one.
const helperEnv = "SHARDMART_MIGRATE_HELPER"

var (
	testHosts []string
	setupErr  error
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	// -run '^$' (a benchmark-only run) needs no shared node: BenchmarkBackfillVsDSBulk starts its own.
	if flag.Parse(); flag.Lookup("test.run").Value.String() == "^$" {
		os.Exit(m.Run())
	}
	code := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		c, stop, err := launcher.StartShared(ctx, launcher.Options{Nodes: 1, BaseAddr: launcher.MigrateTestAddr, HeapMB: 768})
		if err != nil {
			setupErr = fmt.Errorf("start a one-node Cassandra on %s: %w", launcher.MigrateTestAddr, err)
			return m.Run()
		}
		defer stop()
		testHosts = c.Hosts()
		return m.Run()
	}()
	stopMongo()
	os.Exit(code)
}

// keyspace creates a fresh keyspace with the shop's schema and returns a session in it.
func keyspace(t *testing.T) (string, *gocql.Session) {
	ks, st := shopStore(t)
	return ks, st.Session()
}

func shopStore(t *testing.T) (string, *cassandrastore.Store) {
	t.Helper()
	if setupErr != nil {
		t.Fatalf("Cassandra unavailable: %v", setupErr)
	}
	ctx := context.Background()
	var b [4]byte
	_, _ = rand.Read(b[:])
	ks := "mig_" + hex.EncodeToString(b[:])
	if _, err := cassandrastore.ApplySchema(ctx, testHosts, cassandrastore.SchemaOptions{Keyspace: ks, RF: 1}); err != nil {
		t.Fatalf("apply schema: %v", err)
	}
	st, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: testHosts, Keyspace: ks})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		_ = st.Session().Query("DROP KEYSPACE IF EXISTS " + ks).Exec()
		st.Close()
	})
	return ks, st
}

// seed writes n sessions (one in five already expired, the rest with 1 h to 5 days left) and
// m carts (guest carts expiring with a session, user carts never) with up to 3 lines each.
func seed(t *testing.T, n, m int) (path string, live int) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "shop.db")
	db, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	w, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	now := time.Now()
	tx, _ := w.Begin()
	for i := range n {
		id := sha256.Sum256([]byte(fmt.Sprint("s", i)))
		exp := now.Add(time.Duration(1+i%120) * time.Hour)
		if i%5 == 0 {
			exp = now.Add(-time.Hour)
		} else {
			live++
		}
		user := ""
		if i%3 == 0 {
			user = fmt.Sprint("u", i)
		}
		_, err := tx.Exec(`INSERT INTO sessions (id, user_id, created_at, last_active, expires_at, ip, user_agent, status, data) VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?)`,
			hex.EncodeToString(id[:]), user, now.Add(-2*time.Hour).UnixNano(), now.Add(-time.Minute).UnixNano(), exp.UnixNano(),
			fmt.Sprintf("10.0.%d.%d:4000", i/250, i%250), "test-agent", fmt.Sprintf(`{"k":"%d"}`, i))
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range m {
		id, _ := uuid.NewV7()
		owner, exp, status := fmt.Sprint("u:user", i), int64(0), "active"
		if i%2 == 1 {
			owner, exp = fmt.Sprint("s:sess", i), now.Add(48*time.Hour).UnixNano()
		}
		if i%7 == 0 {
			owner, status = fmt.Sprint("u:old", i), "ordered"
		}
		if _, err := tx.Exec(`INSERT INTO carts (id, owner, status, order_id, created_at, updated_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			id.String(), owner, status, map[bool]string{true: "o1"}[status == "ordered"], now.Add(-time.Hour).UnixNano(), now.Add(-time.Minute).UnixNano(), exp); err != nil {
			t.Fatal(err)
		}
		for j := range i % 4 {
			if _, err := tx.Exec(`INSERT INTO cart_items (cart_id, product_id, category, qty, added_at) VALUES (?, ?, 'books', ?, ?)`,
				id.String(), fmt.Sprint("p", j), j+1, now.Add(-30*time.Minute).UnixNano()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return path, live
}

func TestTimeUUIDRoundTrip(t *testing.T) {
	for range 1000 {
		v7, _ := uuid.NewV7()
		g, err := TimeUUID(v7.String())
		if err != nil {
			t.Fatal(err)
		}
		if g.Version() != 1 || SourceID(g) != v7.String() {
			t.Fatalf("%s -> %s (v%d) -> %s", v7, g, g.Version(), SourceID(g))
		}
		if sec, nsec := v7.Time().UnixTime(); !g.Time().Truncate(time.Millisecond).Equal(time.Unix(sec, nsec).Truncate(time.Millisecond)) {
			t.Fatalf("%s keeps %s, want %s", g, g.Time(), time.Unix(sec, nsec))
		}
	}
}

// MIG-1 (engine): sessions and carts copied SQLite → Cassandra, verified with 0 differences, TTLs
// kept, expired rows skipped, and a newer write in Cassandra never overwritten by a replay.
func TestBackfillVerifyTTLAndNewerWins(t *testing.T) {
	ctx := context.Background()
	_, s := keyspace(t)
	path, live := seed(t, 400, 120)
	src, err := OpenSource(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := NewTarget(s)
	var last Progress
	for _, f := range []Family{Sessions, Carts} {
		st, err := Backfill(ctx, src, dst, f, Options{Split: 16, Workers: 4, Progress: func(p Progress) { last = p }})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %+v, last progress %+v", f, st, last)
		if f == Sessions && (st.Rows != int64(live) || st.Skipped != int64(400-live)) {
			t.Fatalf("sessions copied %d skipped %d, want %d and %d", st.Rows, st.Skipped, live, 400-live)
		}
		if rep, err := Verify(ctx, src, dst, f, Options{Split: 16}); err != nil {
			t.Fatalf("verify %s: %v (%v)", f, err, rep.Diffs)
		}
	}
	// TTLs: the seconds left in the source, within a few seconds.
	rows, _ := src.Read(ctx, Sessions, Range{Lo: ""})
	checked := 0
	for _, r := range rows[:50] {
		var ttl *int
		err := s.Query(`SELECT TTL(status) FROM sessions WHERE session_id = ?`, r.Key).Scan(&ttl)
		if r.expired(time.Now(), 0) {
			if !errors.Is(err, gocql.ErrNotFound) {
				t.Fatalf("expired session %s copied (%v)", r.Key, err)
			}
			continue
		}
		if err != nil || ttl == nil {
			t.Fatalf("ttl of %s: %v", r.Key, err)
		}
		want := time.Until(r.Expires).Seconds()
		if d := float64(*ttl) - want; d < -5 || d > 5 {
			t.Fatalf("session %s TTL %d, source has %.0f s left", r.Key, *ttl, want)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no TTL checked")
	}
	// A dual write after the read (current timestamp) survives a replay of its range.
	key := rows[1].Key
	if err := s.Query(`UPDATE sessions SET user_agent = 'newer' WHERE session_id = ?`, key).Exec(); err != nil {
		t.Fatal(err)
	}
	if _, err := Backfill(ctx, src, dst, Sessions, Options{Run: "replay", Split: 16}); err != nil {
		t.Fatal(err)
	}
	var ua string
	if err := s.Query(`SELECT user_agent FROM sessions WHERE session_id = ?`, key).Scan(&ua); err != nil || ua != "newer" {
		t.Fatalf("after replay user_agent = %q (%v), want the newer write kept", ua, err)
	}
	rep, err := Verify(ctx, src, dst, Sessions, Options{Split: 16})
	if !errors.Is(err, ErrDifferences) || len(rep.Diffs) != 1 || rep.Diffs[0].Key != key {
		t.Fatalf("verify after a target-side change: %v %+v", err, rep.Diffs)
	}
}

// helperMain is the child of TestResumeAfterSIGKILL: a slow backfill the parent kills.
func helperMain() int {
	ctx := context.Background()
	s, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: strings.Split(os.Getenv("MIG_HOSTS"), ","), Keyspace: os.Getenv("MIG_KS")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	src, err := OpenSource(ctx, os.Getenv("MIG_DB"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	_, err = Backfill(ctx, src, NewTarget(s.Session()), Sessions, Options{Run: "r1", Split: 16, Workers: 2,
		AfterCheckpoint: func(Range) { time.Sleep(300 * time.Millisecond) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// MIG-1 (engine): a backfill SIGKILLed after some checkpoints resumes, skipping exactly the
// checkpointed ranges, with 0 differences and every live row once.
func TestResumeAfterSIGKILL(t *testing.T) {
	ctx := context.Background()
	ks, s := keyspace(t)
	path, live := seed(t, 2000, 0)
	dst := NewTarget(s)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=1", "MIG_HOSTS="+strings.Join(testHosts, ","), "MIG_KS="+ks, "MIG_DB="+path)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // a failed wait leaves no child; a no-op after Wait
	eventually.NoError(t, 30*time.Second, func() error {
		cps, err := dst.Checkpoints(ctx, "r1", Sessions)
		if err != nil {
			return eventually.Stop(err)
		}
		if len(cps) < 4 {
			return fmt.Errorf("child wrote %d checkpoints, want 4", len(cps))
		}
		return nil
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	cps, _ := dst.Checkpoints(ctx, "r1", Sessions)
	if len(cps) == 16 {
		t.Fatal("child finished before it was killed")
	}
	src, err := OpenSource(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	st, err := Backfill(ctx, src, dst, Sessions, Options{Run: "r1", Split: 16})
	if err != nil {
		t.Fatal(err)
	}
	if st.Resume != len(cps) {
		t.Fatalf("resumed run skipped %d ranges, %d were checkpointed", st.Resume, len(cps))
	}
	// No row lost (verify) and none twice: the checkpoints account for every live row once.
	if rep, err := Verify(ctx, src, dst, Sessions, Options{Split: 16}); err != nil || rep.TargetRows != live {
		t.Fatalf("verify: %v, target %d rows, want %d (%v)", err, rep.TargetRows, live, rep.Diffs)
	}
	cps, _ = dst.Checkpoints(ctx, "r1", Sessions)
	var total int64
	for _, c := range cps {
		total += c.Rows
	}
	if len(cps) != 16 || total != int64(live) {
		t.Fatalf("%d checkpoints covering %d rows, want 16 and %d", len(cps), total, live)
	}
}

// The shop's own Cassandra repositories read what the backfill wrote, and its LWTs edit a
// backfilled cart: the migrated partitions are in the shape the store expects.
func TestShopReadsBackfilledRows(t *testing.T) {
	ctx := context.Background()
	_, st := shopStore(t)
	path, _ := seed(t, 60, 40)
	src, err := OpenSource(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst := NewTarget(st.Session())
	for _, f := range []Family{Sessions, Carts} {
		if _, err := Backfill(ctx, src, dst, f, Options{Split: 16}); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	sessions, _ := src.Read(ctx, Sessions, Range{})
	for _, r := range sessions {
		got, err := st.Sessions().GetSession(ctx, r.Key, now)
		if r.expired(now, 0) {
			if err == nil {
				t.Fatalf("expired session %s readable", r.Key)
			}
			continue
		}
		if err != nil || Canonical(Row{Session: &got}) != Canonical(r) {
			t.Fatalf("session %s: %v\n got %q\nwant %q", r.Key, err, Canonical(Row{Session: &got}), Canonical(r))
		}
	}
	carts, _ := src.Read(ctx, Carts, Range{})
	var guest *Row
	for i, r := range carts {
		if r.Cart.Status != "active" {
			continue
		}
		got, err := st.Carts().ActiveCart(ctx, r.Cart.Owner, now)
		if err != nil {
			t.Fatalf("cart %s of %s: %v", r.Key, r.Cart.Owner.Key(), err)
		}
		got.ID = func() string { g, _ := gocql.ParseUUID(got.ID); return SourceID(g) }()
		if Canonical(Row{Cart: &got}) != Canonical(r) {
			t.Fatalf("cart %s:\n got %q\nwant %q", r.Key, Canonical(Row{Cart: &got}), Canonical(r))
		}
		if r.Cart.Owner.IsGuest() {
			guest = &carts[i]
		}
	}
	if guest == nil {
		t.Fatal("no active guest cart seeded")
	}
	c, err := st.Carts().PutItem(ctx, guest.Cart.Owner, cartItem("p-new", 2), guest.Cart.ExpiresAt, time.Now())
	if err != nil {
		t.Fatalf("LWT edit of a backfilled cart: %v", err)
	}
	if want, _ := TimeUUID(guest.Key); c.ID != want.String() || len(c.Items) != len(guest.Cart.Items)+1 {
		t.Fatalf("edit landed in cart %s with %d lines, want %s with %d", c.ID, len(c.Items), want, len(guest.Cart.Items)+1)
	}
}

func cartItem(pid string, qty int64) cart.Item {
	return cart.Item{ProductID: pid, Category: "books", Quantity: qty, AddedAt: time.Now()}
}
