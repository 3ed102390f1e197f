package cli

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/backup"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// runCLI runs one shardmart command line in this process and returns its output.
func runCLI(args ...string) (string, error) {
	var out bytes.Buffer
	root := NewRootCmd(IO{In: strings.NewReader(""), Out: &out, Err: &out})
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// drillServe is serve on dataDir with the demo data and no rate limits (the drill's load comes
// from one address).
func drillServe(dataDir string) serveOptions {
	var o serveOptions
	o.backend.register(&cobra.Command{})
	o.backend.dataDir = dataDir
	o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", true, "text", "backup-drill-admin-token-0123456789"
	o.shutdownTimeout, o.purgeEvery = 10*time.Second, time.Hour
	o.demo = demo.Defaults()
	return o
}

// drillUser is an account registered through the API, with its password and a logged-in token.
type drillUser struct{ email, password, token string }

func registerUser(c flowClient, email string) drillUser {
	c.t.Helper()
	u := drillUser{email: email, password: "pw-" + email}
	var sess struct{ Token string }
	c.do("POST", "/v1/sessions", "", "", 201, &sess)
	cred := fmt.Sprintf(`{"email":%q,"password":%q}`, u.email, u.password)
	c.do("POST", "/v1/users", sess.Token, cred, 201, nil)
	u.token = loginUser(c, sess.Token, u)
	return u
}

func loginUser(c flowClient, guest string, u drillUser) string {
	c.t.Helper()
	var login struct{ Token string }
	c.do("POST", "/v1/login", guest, fmt.Sprintf(`{"email":%q,"password":%q}`, u.email, u.password), 200, &login)
	return login.Token
}

// stockPlusSold reads, per product and zone, the stock left plus the units of every order not
// cancelled: what the product started with, if no order lost its stock change or vice versa.
func stockPlusSold(t *testing.T, dbPath string) map[string]int64 {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+dbPath+"?_query_only=true&_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`
WITH sold AS (
	SELECT o.zone AS zone, json_extract(j.value, '$.product_id') AS product_id, sum(json_extract(j.value, '$.quantity')) AS n
	FROM orders o, json_each(o.items) j WHERE o.status <> 'cancelled' GROUP BY 1, 2)
SELECT s.product_id, s.zone, s.qty + coalesce(sold.n, 0)
FROM stock s LEFT JOIN sold ON sold.zone = s.zone AND sold.product_id = s.product_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var p, z string
		var n int64
		if err := rows.Scan(&p, &z, &n); err != nil {
			t.Fatal(err)
		}
		out[p+"@"+z] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBackupSQLiteDrill is the embedded store's backup drill on the real shop: serve with the
// demo data under HTTP load (orders with Idempotency-Key, cart edits, registrations and logins)
// while `backup sqlite` copies its store; then serve stops, its data directory is destroyed,
// `restore sqlite` loads the backup into a new one and serve starts there. Every order
// acknowledged before the backup's consistent_at is there, none sent after its snapshot was
// fixed is; stock plus units sold is what each product started with; accounts registered
// before the backup log in with their passwords and their sessions still work; the README's
// shopping flow works; and the load saw no error while the backup ran.
func TestBackupSQLiteDrill(t *testing.T) {
	base := t.TempDir()
	dataDir, backupDir, restoredDir := filepath.Join(base, "data"), filepath.Join(base, "backup"), filepath.Join(base, "restored")
	o := drillServe(dataDir)
	live := startLiveShop(t, o)
	c := flowClient{t: t, api: live.api, admin: o.adminToken}

	buyers := make([]drillUser, 4)
	for i := range buyers {
		buyers[i] = registerUser(c, fmt.Sprintf("buyer-%d@example.com", i))
	}
	var search struct {
		Items []struct {
			ID    string
			Stock map[string]int64
		}
	}
	c.do("GET", "/v1/products?category=electronics&limit=100", "", "", 200, &search)
	var products []string
	for _, p := range search.Items {
		if p.Stock["eu-west"] >= 20 {
			products = append(products, p.ID)
		}
	}
	if len(products) < 10 {
		t.Fatalf("only %d electronics products with stock in eu-west: %+v", len(products), search.Items)
	}
	initial := stockPlusSold(t, filepath.Join(dataDir, sqliteBackupFile))

	type ack struct {
		id, buyer  string
		sent, done time.Time
	}
	var (
		mu       sync.Mutex
		acks     []ack
		problems []string
		wg       sync.WaitGroup
	)
	loadCtx, stopLoad := context.WithCancel(context.Background())
	unexpected := func(what string, st int, b []byte, err error) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf("%s: %d %s %v", what, st, b, err))
	}
	for w, u := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; loadCtx.Err() == nil; i++ {
				p := products[(w*7+i)%len(products)]
				if st, b, _, err := c.send("PUT", "/v1/cart/items/"+p, u.token, `{"quantity":1}`, ""); st != 200 {
					unexpected("PUT cart item "+p, st, b, err)
					continue
				}
				sent := time.Now()
				st, b, _, err := c.send("POST", "/v1/orders", u.token, `{"zone":"eu-west"}`, fmt.Sprintf("drill-%d-%d", w, i))
				done := time.Now()
				switch {
				case st == 201:
					var o struct{ ID string }
					if err := json.Unmarshal(b, &o); err != nil || o.ID == "" {
						unexpected("POST /v1/orders", st, b, err)
						continue
					}
					mu.Lock()
					acks = append(acks, ack{o.ID, u.email, sent, done})
					mu.Unlock()
				case st == 409 && strings.Contains(string(b), "insufficient-stock"):
					_, _, _, _ = c.send("DELETE", "/v1/cart/items/"+p, u.token, "", "")
				default:
					unexpected("POST /v1/orders", st, b, err)
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // guests who browse, fill a cart, register and log in
		defer wg.Done()
		for i := 0; loadCtx.Err() == nil; i++ {
			st, b, _, err := c.send("POST", "/v1/sessions", "", "", "")
			var sess struct{ Token string }
			if st != 201 || json.Unmarshal(b, &sess) != nil {
				unexpected("POST /v1/sessions", st, b, err)
				continue
			}
			if st, b, _, err := c.send("PUT", "/v1/cart/items/"+products[i%len(products)], sess.Token, `{"quantity":2}`, ""); st != 200 {
				unexpected("guest PUT cart item", st, b, err)
			}
			cred := fmt.Sprintf(`{"email":"during-%d@example.com","password":"during-password-%d"}`, i, i)
			if st, b, _, err := c.send("POST", "/v1/users", sess.Token, cred, ""); st != 201 {
				unexpected("POST /v1/users", st, b, err)
				continue
			}
			if st, b, _, err := c.send("POST", "/v1/login", sess.Token, cred, ""); st != 200 {
				unexpected("POST /v1/login", st, b, err)
			}
		}
	}()
	acked := func() int { mu.Lock(); defer mu.Unlock(); return len(acks) }
	eventually.True(t, 60*time.Second, "20 orders acknowledged before the backup", func() bool { return acked() >= 20 })

	out, err := runCLI("backup", "sqlite", "--data-dir", dataDir, "--out", backupDir)
	if err != nil {
		stopLoad()
		wg.Wait()
		t.Fatalf("backup sqlite while serve runs: %v\n%s", err, out)
	}
	t.Logf("backup sqlite:\n%s", out)
	after := acked()
	eventually.True(t, 60*time.Second, "20 orders acknowledged after the backup", func() bool { return acked() >= after+20 })
	stopLoad()
	wg.Wait()
	if len(problems) > 0 {
		t.Errorf("the load met %d unexpected answers while the backup ran, first: %v", len(problems), problems[:min(5, len(problems))])
	}
	m, err := backup.Verify(backupDir)
	if err != nil {
		t.Fatalf("the backup does not verify: %v", err)
	}
	fixed, err := time.Parse(time.RFC3339Nano, m.Meta["snapshot_fixed"])
	if err != nil || m.Store != "sqlite" || m.Meta["sqlite_version"] == "" || !strings.HasSuffix(m.Source, filepath.Join("data", sqliteBackupFile)) {
		t.Fatalf("manifest %+v (snapshot_fixed: %v)", m, err)
	}
	if !strings.Contains(out, "sealed") || !strings.Contains(out, "MiB") || !strings.Contains(out, "tables") {
		t.Errorf("backup output says no size, tables or time:\n%s", out)
	}
	live.stop()

	// The data directory is lost; the backup is restored into a new one.
	if err := os.RemoveAll(dataDir); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI("restore", "sqlite", "--from", backupDir, "--data-dir", restoredDir); err != nil {
		t.Fatalf("restore sqlite: %v\n%s", err, out)
	}
	restored := startLiveShop(t, drillServe(restoredDir))
	defer restored.stop()
	c.api = restored.api

	var before, absent int
	tokens := map[string]string{}
	// A session opened before the backup is restored with it.
	c.do("GET", "/v1/cart", buyers[0].token, "", 200, nil)
	for _, u := range buyers {
		var sess struct{ Token string }
		c.do("POST", "/v1/sessions", "", "", 201, &sess)
		tokens[u.email] = loginUser(c, sess.Token, u) // a password set before the backup
	}
	for _, a := range acks {
		switch {
		case a.done.Before(m.ConsistentAt):
			before++
			var o struct{ ID, Status string }
			c.do("GET", "/v1/orders/"+a.id, tokens[a.buyer], "", 200, &o)
			if o.ID != a.id {
				t.Errorf("order %s read back as %+v", a.id, o)
			}
		case a.sent.After(fixed):
			absent++
			c.do("GET", "/v1/orders/"+a.id, tokens[a.buyer], "", 404, nil)
		}
	}
	if before == 0 || absent == 0 {
		t.Errorf("%d orders acknowledged before consistent_at, %d sent after the snapshot; the drill needs both", before, absent)
	}
	if got := stockPlusSold(t, filepath.Join(restoredDir, sqliteBackupFile)); !mapsEqual(got, initial) {
		t.Errorf("stock + sold after the restore differs from what the products started with in %d of %d product zones", diffCount(got, initial), len(initial))
	}

	readmeFlow(t, c)
	if got := stockPlusSold(t, filepath.Join(restoredDir, sqliteBackupFile)); !mapsEqual(got, initial) {
		t.Errorf("stock + sold after an order on the restored shop differs in %d product zones", diffCount(got, initial))
	}
	t.Logf("%d orders acknowledged: %d before consistent_at (all restored), %d sent after the snapshot (none restored); backup %s",
		len(acks), before, absent, mib(m.Files[0].Bytes))
}

func mapsEqual(a, b map[string]int64) bool { return diffCount(a, b) == 0 }

func diffCount(a, b map[string]int64) int {
	n := 0
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			n++
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			n++
		}
	}
	return n
}

// readmeFlow is the README's shopping flow with curl: a guest session, a search and a product,
// a cart edit, register and log in (the cart merges), an order and its replay, the history and
// the order, an admin status change.
func readmeFlow(t *testing.T, c flowClient) {
	t.Helper()
	var sess struct{ Token string }
	c.do("POST", "/v1/sessions", "", "", 201, &sess)
	var search struct{ Items []struct{ ID string } }
	c.do("GET", "/v1/products?category=books&min_price=10.00&max_price=50.00&limit=5", "", "", 200, &search)
	if len(search.Items) == 0 {
		t.Error("the README's search found no books between 10.00 and 50.00")
	}
	c.do("GET", "/v1/products/books-00001", "", "", 200, nil)
	c.do("PUT", "/v1/cart/items/books-00001", sess.Token, `{"quantity":2}`, 200, nil)
	ann := drillUser{email: "ann@example.com", password: "correct horse"}
	c.do("POST", "/v1/users", sess.Token, `{"email":"ann@example.com","password":"correct horse"}`, 201, nil)
	token := loginUser(c, sess.Token, ann)
	var ord struct{ ID, Status string }
	c.idem = "order-1"
	c.do("POST", "/v1/orders", token, `{"zone":"eu-west"}`, 201, &ord)
	if h := c.do("POST", "/v1/orders", token, `{"zone":"eu-west"}`, 200, nil); h.Get("Idempotency-Replayed") != "true" {
		t.Errorf("the README's order retry was not replayed: %v", h)
	}
	c.idem = ""
	eventually.NoError(t, 30*time.Second, func() error {
		var hist struct{ Items []struct{ ID string } }
		c.do("GET", "/v1/orders?limit=10", token, "", 200, &hist)
		if len(hist.Items) == 0 || hist.Items[0].ID != ord.ID {
			return fmt.Errorf("history %+v, want order %s first", hist.Items, ord.ID)
		}
		return nil
	})
	c.do("GET", "/v1/orders/"+ord.ID, token, "", 200, nil)
	c.do("POST", "/v1/orders/"+ord.ID+"/status", "", `{"status":"paid"}`, 200, nil)
	c.do("POST", "/v1/orders/"+ord.ID+"/status", "", `{"status":"created"}`, 409, nil)
}

// seedStore writes an embedded store in dataDir of about mb MiB (long product descriptions),
// so its copy spans several backup steps.
func seedStore(t *testing.T, dataDir string, mb int) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlitestore.Open(ctx, filepath.Join(dataDir, sqliteBackupFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ps []catalog.Product
	for i := range mb * 128 { // ~8 KiB a product with its outbox row
		ps = append(ps, catalog.Product{ID: fmt.Sprintf("p-%06d", i), Name: "Product", Category: "c",
			Description: strings.Repeat("d", 4000), Price: money.MustParse("1.00"), Stock: map[string]int64{"eu-west": 5}})
	}
	for from := 0; from < len(ps); from += 500 {
		if err := db.Products().CreateProducts(ctx, ps[from:min(from+500, len(ps))]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBackupSQLiteKilledMidwayIsRefused SIGKILLs a `backup sqlite` process while it copies
// pages: what it leaves has no manifest, and restore refuses it (ErrIncomplete, exit status 1)
// without leaving anything in the data directory. A finished backup's database without its
// manifest is refused the same way.
func TestBackupSQLiteKilledMidwayIsRefused(t *testing.T) {
	dir := t.TempDir()
	dataDir, killed := filepath.Join(dir, "data"), filepath.Join(dir, "killed")
	seedStore(t, dataDir, 48)
	cmd := shardmartCmd("backup", "sqlite", "--data-dir", dataDir, "--out", killed)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var seen []string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		seen = append(seen, lines.Text())
		if strings.Contains(lines.Text(), "copied ") {
			if strings.Contains(lines.Text(), "(100%)") {
				t.Fatalf("the first progress line is the last: the store is too small to be killed mid-copy:\n%s", strings.Join(seen, "\n"))
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	_, _ = io.Copy(io.Discard, stdout)
	_ = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("backup process ended %v, want killed by SIGKILL mid-copy; it printed:\n%s", cmd.ProcessState, strings.Join(seen, "\n"))
	}
	if _, err := os.Stat(filepath.Join(killed, sqliteBackupFile)); err != nil {
		t.Errorf("the killed backup left no partial copy: %v", err)
	}
	if _, err := os.Stat(filepath.Join(killed, backup.ManifestName)); err == nil {
		t.Fatal("the killed backup has a manifest")
	}
	assertRefused := func(from string, want error) {
		t.Helper()
		into := filepath.Join(t.TempDir(), "data")
		err := runRestoreSQLite(context.Background(), IO{Out: io.Discard, Err: io.Discard}, restoreSQLiteOptions{from: from, dataDir: into})
		if !errors.Is(err, want) {
			t.Errorf("restore from %s: %v, want %v", from, err, want)
		}
		if ents, _ := os.ReadDir(into); len(ents) > 0 {
			t.Errorf("a refused restore left %d entries in the data directory, first %s", len(ents), ents[0].Name())
		}
	}
	assertRefused(killed, backup.ErrIncomplete)
	restoreFails(t, killed, filepath.Join(dir, "restored"), "no manifest")

	// A complete copy without its manifest: refused as well.
	done := filepath.Join(dir, "done")
	if out, err := runCLI("backup", "sqlite", "--data-dir", dataDir, "--out", done); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if err := os.Remove(filepath.Join(done, backup.ManifestName)); err != nil {
		t.Fatal(err)
	}
	assertRefused(done, backup.ErrIncomplete)
}

// restoreFails runs `shardmart restore sqlite` as its own process and checks that it exits
// with status 1, saying why, and leaves no database in the data directory.
func restoreFails(t *testing.T, from, into, why string) {
	t.Helper()
	out, err := shardmartCmd("restore", "sqlite", "--from", from, "--data-dir", into).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), why) {
		t.Errorf("restore sqlite --from %s: %v, output:\n%s\nwant exit status 1 saying %q", from, err, out, why)
	}
	if _, err := os.Stat(filepath.Join(into, sqliteBackupFile)); err == nil {
		t.Errorf("a refused restore left %s in the data directory", sqliteBackupFile)
	}
}

// TestRestoreSQLiteRefusesAChangedBackup: a changed byte in the database, or a manifest whose
// counts differ from the database it names, make restore exit non-zero and leave no database
// in the data directory; a non-empty data directory is refused; the untouched backup restores.
func TestRestoreSQLiteRefusesAChangedBackup(t *testing.T) {
	dir := t.TempDir()
	dataDir, good := filepath.Join(dir, "data"), filepath.Join(dir, "good")
	seedStore(t, dataDir, 1)
	if out, err := runCLI("backup", "sqlite", "--data-dir", dataDir, "--out", good); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if out, err := runCLI("backup", "sqlite", "--data-dir", dataDir, "--out", good); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a backup into a non-empty directory: %v\n%s", err, out)
	}
	if st, err := os.Stat(filepath.Join(good, sqliteBackupFile)); err != nil {
		t.Fatal(err)
	} else if st.Mode().Perm()&0o007 != 0 {
		t.Errorf("the backup's copy has mode %v; want it unreadable by others (password hashes)", st.Mode())
	}
	clone := func(name string) string {
		t.Helper()
		to := filepath.Join(dir, name)
		if err := os.MkdirAll(to, 0o750); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{sqliteBackupFile, backup.ManifestName} {
			b, err := os.ReadFile(filepath.Join(good, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(to, f), b, 0o640); err != nil {
				t.Fatal(err)
			}
		}
		return to
	}

	flipped := clone("flipped")
	db := filepath.Join(flipped, sqliteBackupFile)
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(db, b, 0o640); err != nil {
		t.Fatal(err)
	}
	restoreFails(t, flipped, filepath.Join(dir, "into-flipped"), "differs from its manifest")

	// The manifest is not hashed itself: a changed count is caught by counting what was loaded.
	counted := clone("counted")
	m, err := backup.Open(counted)
	if err != nil {
		t.Fatal(err)
	}
	m.Counts["products"]++
	mb, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(counted, backup.ManifestName), mb, 0o640); err != nil {
		t.Fatal(err)
	}
	into := filepath.Join(dir, "into-counted")
	err = runRestoreSQLite(context.Background(), IO{Out: io.Discard, Err: io.Discard}, restoreSQLiteOptions{from: counted, dataDir: into})
	if !errors.Is(err, backup.ErrMismatch) || !strings.Contains(err.Error(), "products") {
		t.Errorf("restore with a count that differs: %v, want ErrMismatch naming products", err)
	}
	if ents, _ := os.ReadDir(into); len(ents) > 0 {
		t.Errorf("a refused restore left %d entries, first %s", len(ents), ents[0].Name())
	}

	if out, err := runCLI("restore", "sqlite", "--from", good, "--data-dir", dataDir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("restore into the live data directory: %v\n%s", err, out)
	}
	into = filepath.Join(dir, "into-good")
	if out, err := runCLI("restore", "sqlite", "--from", good, "--data-dir", into); err != nil {
		t.Fatalf("restore of the untouched backup: %v\n%s", err, out)
	}
	in, err := sqlitestore.Inspect(context.Background(), filepath.Join(into, sqliteBackupFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := backup.CheckCounts(m, in.Counts); !errors.Is(err, backup.ErrMismatch) {
		t.Errorf("restored counts against the changed manifest: %v", err)
	}
	m.Counts["products"]--
	if err := backup.CheckCounts(m, in.Counts); err != nil {
		t.Errorf("restored counts: %v", err)
	}
	if ents, _ := os.ReadDir(into); len(ents) != 1 {
		t.Errorf("the restored data directory holds %d entries, want only %s", len(ents), sqliteBackupFile)
	}
}

// TestBackupSQLiteFlags: --data-dir comes from SHARDMART_DATA_DIR unless given; --out and
// --from are required.
func TestBackupSQLiteFlags(t *testing.T) {
	t.Setenv("SHARDMART_DATA_DIR", "/srv/shop")
	var b backupSQLiteOptions
	if err := execUnderRoot(t, newCmdBackupSQLite(IO{}, func(_ context.Context, o backupSQLiteOptions) error { b = o; return nil }),
		"sqlite", "--out", "/backups/1"); err != nil {
		t.Fatal(err)
	}
	if b.dataDir != "/srv/shop" || b.out != "/backups/1" {
		t.Errorf("backup sqlite options %+v", b)
	}
	var r restoreSQLiteOptions
	if err := execUnderRoot(t, newCmdRestoreSQLite(IO{}, func(_ context.Context, o restoreSQLiteOptions) error { r = o; return nil }),
		"sqlite", "--from", "/backups/1", "--data-dir", "/srv/new"); err != nil {
		t.Fatal(err)
	}
	if r.dataDir != "/srv/new" || r.from != "/backups/1" {
		t.Errorf("restore sqlite options %+v (a flag wins over the environment)", r)
	}
	if err := runBackupSQLite(context.Background(), IO{Out: io.Discard}, backupSQLiteOptions{dataDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "--out") {
		t.Errorf("backup without --out: %v", err)
	}
	if err := runRestoreSQLite(context.Background(), IO{Out: io.Discard}, restoreSQLiteOptions{dataDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "--from") {
		t.Errorf("restore without --from: %v", err)
	}
	empty := t.TempDir()
	if err := runBackupSQLite(context.Background(), IO{Out: io.Discard}, backupSQLiteOptions{dataDir: empty, out: filepath.Join(empty, "b")}); err == nil || !strings.Contains(err.Error(), "no embedded store") {
		t.Errorf("backup of a directory without a store: %v", err)
	}
	if _, err := os.Stat(filepath.Join(empty, sqliteBackupFile)); err == nil {
		t.Error("backing up an empty data directory created a store in it")
	}
}
