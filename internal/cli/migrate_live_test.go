package cli

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/spf13/cobra"

	cassandralauncher "github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/loadgen"
	"github.com/shardmart/shardmart/internal/migrate"
	mongolauncher "github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/serverproc"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// cliHelperEnv makes this test binary run the shardmart command line given in it (arguments
// separated by \x1f) instead of the tests: the migration tests SIGKILL `migrate run` as a
// separate process, as an operator's would die.
const cliHelperEnv = "SHARDMART_CLI_HELPER"

func TestMain(m *testing.M) {
	if args := os.Getenv(cliHelperEnv); args != "" {
		root := NewRootCmd(IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
		root.SetArgs(strings.Split(args, "\x1f"))
		if err := root.ExecuteContext(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if stopLiveCassandra != nil {
		stopLiveCassandra()
	}
	if stopDualMongo != nil {
		stopDualMongo()
	}
	os.Exit(code)
}

// The one-node Cassandra the embedded and the MongoDB shop migrate into (one keyspace each),
// started by the first test that needs it and stopped by TestMain.
var (
	liveCassandraOnce sync.Once
	liveHosts         []string
	liveErr           error
	stopLiveCassandra func()
)

func liveCassandra(t *testing.T) []string {
	t.Helper()
	liveCassandraOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c, stop, err := cassandralauncher.StartShared(ctx, cassandralauncher.Options{Nodes: 1, BaseAddr: cassandralauncher.MigrateLiveTestAddr, HeapMB: 768})
		if err != nil {
			liveErr = err
			return
		}
		liveHosts, stopLiveCassandra = c.Hosts(), stop
	})
	if liveErr != nil {
		t.Fatalf("start Cassandra on %s: %v", cassandralauncher.MigrateLiveTestAddr, liveErr)
	}
	return liveHosts
}

// liveShop is a shop under test: serve in this process, following the migration state.
type liveShop struct {
	t      *testing.T
	o      serveOptions
	api    string
	logs   *serverproc.Output
	cancel context.CancelFunc
	errc   chan error
}

func startLiveShop(t *testing.T, o serveOptions) *liveShop {
	t.Helper()
	s := &liveShop{t: t, o: o, logs: &serverproc.Output{}, errc: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	ready := make(chan string, 1)
	go func() { s.errc <- runServe(ctx, IO{Out: io.Discard, Err: s.logs}, o, ready) }()
	select {
	case addr := <-ready:
		s.api = "http://" + addr
	case err := <-s.errc:
		t.Fatalf("serve failed: %v\n%s", err, s.logs.String())
	case <-time.After(2 * time.Minute):
		t.Fatal("serve did not start")
	}
	eventually.True(t, 3*time.Minute, "the shop to be ready", func() bool {
		resp, err := http.Get(s.api + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

func (s *liveShop) stop() {
	s.cancel()
	if err := <-s.errc; err != nil {
		s.t.Errorf("shutdown: %v\n%s", err, s.logs.String())
	}
}

// outboxDrained waits until the projector has applied every outbox row (history and the
// catalog are fed from it).
func (s *liveShop) outboxDrained() {
	s.t.Helper()
	re := regexp.MustCompile(`(?m)^shardmart_outbox_lag_messages (\d+)`)
	eventually.True(s.t, time.Minute, "the outbox to drain", func() bool {
		resp, err := http.Get(s.api + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := re.FindSubmatch(b)
		return m != nil && string(m[1]) == "0"
	})
}

// shardmartCmd runs this binary as `shardmart args...`.
func shardmartCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), cliHelperEnv+"="+strings.Join(args, "\x1f"))
	return cmd
}

// migrateCLI runs `shardmart migrate verb` with the store flags and returns its output.
func migrateCLI(t *testing.T, store []string, verb string, args ...string) (string, error) {
	t.Helper()
	cmd := shardmartCmd(append(append([]string{"migrate", verb}, store...), args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// migrationTraffic is the live traffic of a migration test: cart edits, checkouts feeding the
// history, events, and new sessions with logins, against the shop's HTTP API.
var migrationTraffic = loadgen.Mix{{Kind: loadgen.Cart, Share: 40}, {Kind: loadgen.Checkout, Share: 15},
	{Kind: loadgen.Event, Share: 30}, {Kind: loadgen.Login, Share: 10}, {Kind: loadgen.Product, Share: 5}}

// startTraffic runs the mix at rate until the returned stop is called, which returns the report.
func startTraffic(t *testing.T, api, admin string, rate float64) func() loadgen.Report {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sh, err := loadgen.Prepare(ctx, loadgen.Config{BaseURL: api, AdminToken: admin, Mix: migrationTraffic, Users: 12, Seed: 7,
		ZipfS: 1.2, Categories: []string{"electronics", "books", "clothing"}, PerCategory: 30, Zone: demo.Zones[0]})
	if err != nil {
		cancel()
		t.Fatalf("prepare traffic: %v", err)
	}
	// Stopping the traffic stops new requests and lets those in flight finish (each within the
	// client's timeout): one cancelled mid-way can leave its write in the old store after the
	// dual write read the key back (docs/migration.md, limits), which verify would then list.
	next := func(seq int) loadgen.Op {
		op := sh.Next(seq)
		do := op.Do
		op.Do = func(ctx context.Context) (loadgen.Outcome, string) { return do(context.WithoutCancel(ctx)) }
		return op
	}
	done := make(chan loadgen.Report, 1)
	go func() {
		rep, _ := loadgen.Run(ctx, loadgen.Schedule{Rate: rate, Duration: 30 * time.Minute, MaxInFlight: 64}, next)
		done <- rep
	}()
	return func() loadgen.Report { cancel(); return <-done }
}

// checkpointsDone counts the checkpoints of run over every family.
func checkpointsDone(t *testing.T, dst *migrate.Target, run string) int {
	n := 0
	for _, f := range migrate.Families {
		cps, err := dst.Checkpoints(context.Background(), run, f)
		if err != nil {
			t.Fatal(err)
		}
		n += len(cps)
	}
	return n
}

// logProductRows logs, for each key verify's output lists as differing, the catalog row as
// every replica agrees on it (ALL) with its write times, so a failed CI run leaves what wrote
// the product's state: a backfill writes 1 µs under a millisecond, a projector at its clock.
func logProductRows(t *testing.T, s *gocql.Session, verifyOut string) {
	t.Helper()
	for _, m := range regexp.MustCompile(`(?m)^  range \d+  (\S+)  `).FindAllStringSubmatch(verifyOut, -1) {
		var (
			stock           map[string]int64
			updated         time.Time
			wtPrice, wtName int64
			wtStock         []int64
		)
		err := s.Query(`SELECT stock, updated_at, WRITETIME(price), WRITETIME(name), WRITETIME(stock) FROM products WHERE product_id = ?`, m[1]).
			Consistency(gocql.All).Scan(&stock, &updated, &wtPrice, &wtName, &wtStock)
		t.Logf("catalog row %s at ALL: stock %v, updated_at %s (%d µs), WRITETIME price %d name %d stock %v (%v)",
			m[1], stock, updated.Format(time.RFC3339Nano), updated.UnixMicro(), wtPrice, wtName, wtStock, err)
	}
}

// MIG-1: the demo shop (embedded store) moves every family to Cassandra with traffic running:
// dual writes on, the backfill SIGKILLed twice and resumed, verify with 0 differences and TTLs
// kept, cutover that a restart keeps, and a rollback that finds the writes made since.
func TestMigrateEmbeddedShopWithTraffic(t *testing.T) {
	migrateLiveShop(t, liveCassandra(t), "embedded", 1, nil)
}

// MIG-1: the same with a MongoDB shop (every family on a real replica set) as the old store.
func TestMigrateMongoShopWithTraffic(t *testing.T) {
	hosts := liveCassandra(t)
	set := mongolauncher.ForTest(t, mongolauncher.Options{Members: 1, BasePort: mongolauncher.MigrateLiveTestPort})
	migrateLiveShop(t, hosts, "mongoshop", 1, func(o *serveOptions) {
		o.backend.mongoURI = set.URI()
		o.backend.placement = "orders=mongo,carts=mongo,sessions=mongo,events=mongo,history=mongo,catalog=mongo"
	})
}

// MIG-1 on the 3-node cluster: the embedded shop into a keyspace with 3 replicas, QUORUM.
func TestMigrateEmbeddedShopTo3Nodes(t *testing.T) {
	c := cassandralauncher.ForTest(t, cassandralauncher.Options{Nodes: 3, BaseAddr: cassandralauncher.MigrateLive3TestAddr, HeapMB: 512})
	migrateLiveShop(t, c.Hosts(), "three", 3, nil)
}

// migrateLiveShop runs the whole procedure against keyspace ks at hosts with rf replicas;
// mongoPlacement, when set, puts the shop on MongoDB, else it runs on the embedded store.
func migrateLiveShop(t *testing.T, hosts []string, ks string, rf int, mongoPlacement func(o *serveOptions)) {
	ctx := context.Background()
	ks = fmt.Sprintf("%s_%d", ks, time.Now().UnixNano()%1_000_000) // a fresh keyspace per run (-count)
	if _, err := cassandrastore.ApplySchema(ctx, hosts, cassandrastore.SchemaOptions{Keyspace: ks, RF: rf}); err != nil {
		t.Fatalf("apply schema: %v", err)
	}
	cst, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: hosts, Keyspace: ks})
	if err != nil {
		t.Fatal(err)
	}
	defer cst.Close()
	defer func() { _ = cst.Session().Query("DROP KEYSPACE IF EXISTS " + ks).Exec() }()
	dst := migrate.NewTarget(cst.Session())

	var o serveOptions
	o.backend.register(&cobra.Command{})
	o.backend.dataDir = t.TempDir()
	o.backend.cassandraHosts, o.backend.cassandraKeyspace, o.backend.migrations = strings.Join(hosts, ","), ks, true
	o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", true, "text", "migrate-live-admin-token"
	o.shutdownTimeout, o.purgeEvery, o.migrationPoll = 10*time.Second, time.Hour, 200*time.Millisecond
	o.demo = demo.Options{Products: 1500, Categories: 5, Users: 40, Seed: 3}
	from := "sqlite"
	if mongoPlacement != nil {
		mongoPlacement(&o)
		from = "mongo"
	}
	store := []string{"--data-dir", o.backend.dataDir, "--mongo-uri", o.backend.mongoURI, "--cassandra-hosts", o.backend.cassandraHosts,
		"--cassandra-keyspace", ks, "--from", from, "--progress", "lines"}

	shop := startLiveShop(t, o)
	defer func() { shop.stop() }()
	stopTraffic := startTraffic(t, shop.api, o.adminToken, 30)
	trafficStopped := false
	defer func() {
		if !trafficStopped {
			stopTraffic()
		}
	}()

	out, err := migrateCLI(t, store, "plan", "--family", "all")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	for _, f := range migrate.Families {
		if !regexp.MustCompile(`(?m)^` + string(f) + `\s+[1-9]\d*\s`).MatchString(out) {
			t.Errorf("plan shows no rows for %s:\n%s", f, out)
		}
	}

	// Two runs SIGKILLed mid-way, each after it checkpointed a few more ranges.
	runArgs := []string{"--family", "all", "--ranges", "24", "--workers", "2", "--max-rows-per-sec", "800", "--writers-wait", "30s"}
	for kill := range 2 {
		before := checkpointsDone(t, dst, "1")
		cmd := shardmartCmd(append(append([]string{"migrate", "run"}, store...), runArgs...)...)
		var outb serverproc.Output
		cmd.Stdout, cmd.Stderr = &outb, &outb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		eventually.NoError(t, 3*time.Minute, func() error {
			if n := checkpointsDone(t, dst, "1"); n < before+3 {
				select {
				case err := <-exited:
					return eventually.Stop(fmt.Errorf("run %d ended before it was killed (%v):\n%s", kill+1, err, outb.String()))
				default:
					return fmt.Errorf("run %d made no progress (%d checkpoints, want %d):\n%s", kill+1, n, before+3, outb.String())
				}
			}
			return nil
		})
		_ = cmd.Process.Kill() // SIGKILL
		<-exited
		t.Logf("run %d killed after %d checkpoints:\n%s", kill+1, checkpointsDone(t, dst, "1"), lastLines(outb.String(), 4))
	}
	out, err = migrateCLI(t, store, "run", runArgs...)
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "resuming run 1") && !strings.Contains(out, "already copied (run 1)") {
		t.Errorf("the third run did not go on with run 1:\n%s", out)
	}
	t.Logf("resumed run:\n%s", lastLines(out, 12))

	// Traffic stops only now: everything it wrote during the copy went through the dual write.
	rep := stopTraffic()
	trafficStopped = true
	sent := rep.Total.OK + rep.Total.Expected
	t.Logf("traffic during the migration: %d requests answered, %d failed (first: %s)", sent, rep.Total.Failed, rep.Total.FirstError)
	if sent < 100 {
		t.Fatalf("only %d requests of traffic ran during the migration", sent)
	}
	shop.outboxDrained()

	out, err = migrateCLI(t, store, "verify", "--family", "all", "--explain")
	if err != nil {
		logProductRows(t, cst.Session(), out)
		t.Fatalf("verify: %v\n%s\nshop errors:\n%s", err, out, grepLines(shop.logs.String(), "level=ERROR"))
	}
	for _, f := range migrate.Families {
		m := regexp.MustCompile(`(?m)^` + string(f) + `: source (\d+) rows, target (\d+) rows, \d+ ranges, 0 differing ranges, 0 differing keys$`).FindStringSubmatch(out)
		if m == nil || m[1] != m[2] || m[1] == "0" {
			t.Errorf("verify of %s is not a clean, non-empty match:\n%s", f, out)
		}
	}
	checkTTLs(t, cst.Session(), shop)

	out, err = migrateCLI(t, store, "cutover", "--family", "all", "--writers-wait", "30s")
	if err != nil {
		t.Fatalf("cutover: %v\n%s", err, out)
	}
	// Served from Cassandra now: a cart line added after cutover is in Cassandra's user_carts.
	c := flowClient{t: t, api: shop.api, admin: o.adminToken}
	var sess struct{ Token string }
	c.do("POST", "/v1/sessions", "", "", 201, &sess)
	c.do("PUT", "/v1/cart/items/"+firstProduct(t, c), sess.Token, `{"quantity":2}`, 200, nil)
	var n int
	if err := cst.Session().Query(`SELECT count(*) FROM guest_carts WHERE session_id = ?`, session.IDFromToken(sess.Token)).Scan(&n); err != nil || n == 0 {
		t.Fatalf("the cart written after cutover is not in Cassandra (rows %d, err %v)", n, err)
	}

	// A restart keeps the cutover: the cart only Cassandra holds is served.
	shop.stop()
	shop = startLiveShop(t, o)
	c.api = shop.api
	var got struct {
		Items []struct {
			ProductID string `json:"product_id"`
		}
	}
	c.do("GET", "/v1/cart", sess.Token, "", 200, &got)
	if len(got.Items) != 1 {
		t.Fatalf("after a restart the cart shows %d lines, want the 1 written after cutover", len(got.Items))
	}

	// Rollback: what was written while Cassandra served (the session, its cart, an event) was
	// copied back, so the old store serves it, and a verify finds both stores equal again.
	c.do("POST", "/v1/events", sess.Token, `{"type":"view","product_id":"`+firstProduct(t, c)+`"}`, 201, nil)
	back := "sessions,carts,events,history"
	out, err = migrateCLI(t, store, "cutover", "--rollback", "--family", back, "--writers-wait", "30s")
	if err != nil {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	got.Items = nil
	c.do("GET", "/v1/cart", sess.Token, "", 200, &got)
	if len(got.Items) != 1 {
		t.Fatalf("after the rollback the cart shows %d lines, want the 1 written during the cutover", len(got.Items))
	}
	var evs struct{ Items []struct{ Type string } }
	c.do("GET", "/v1/events", sess.Token, "", 200, &evs)
	if len(evs.Items) != 1 {
		t.Errorf("after the rollback the session lists %d events, want the 1 posted during the cutover", len(evs.Items))
	}
	if out, err = migrateCLI(t, store, "verify", "--family", back); err != nil {
		t.Fatalf("verify after the rollback: %v\n%s", err, out)
	}

	out, err = migrateCLI(t, store, "status")
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, want := range []string{`(?m)^sessions\s+verified\s`, `(?m)^carts\s+verified\s`, `(?m)^catalog\s+cutover\s`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("status does not match %s:\n%s", want, out)
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// checkTTLs compares the time left of a few sessions in Cassandra with their expiry in the
// embedded store (or, for a MongoDB shop, with the expires_at Cassandra holds).
func checkTTLs(t *testing.T, s *gocql.Session, shop *liveShop) {
	t.Helper()
	iter := s.Query(`SELECT session_id, expires_at, TTL(user_agent) FROM sessions LIMIT 20`).Iter()
	var id string
	var exp time.Time
	var ttl int
	checked := 0
	for iter.Scan(&id, &exp, &ttl) {
		left := time.Until(exp).Seconds()
		if d := left - float64(ttl); d < -5 || d > 5 {
			t.Errorf("session %s: TTL %d s, but %0.f s left until its expiry", id, ttl, left)
		}
		checked++
	}
	if err := iter.Close(); err != nil || checked == 0 {
		t.Fatalf("read session TTLs: %v (%d rows)", err, checked)
	}
	if shop.o.backend.mongoURI != "" {
		return
	}
	db, err := sql.Open("sqlite3", "file:"+shop.o.backend.sqlitePath()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var srcExp int64
	if err := db.QueryRow(`SELECT expires_at FROM sessions WHERE id = ?`, id).Scan(&srcExp); err != nil {
		t.Fatalf("session %s in the embedded store: %v", id, err)
	}
	if d := time.Unix(0, srcExp).Sub(exp); d < -time.Millisecond || d > time.Millisecond {
		t.Errorf("session %s expires at %s in the embedded store, %s in Cassandra", id, time.Unix(0, srcExp).UTC(), exp)
	}
}

func firstProduct(t *testing.T, c flowClient) string {
	var page struct{ Items []struct{ ID string } }
	c.do("GET", "/v1/products?category=books&limit=5", "", "", 200, &page)
	if len(page.Items) == 0 {
		t.Fatal("no products in books")
	}
	return page.Items[0].ID
}
