package cli

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/migrate"
	mongolauncher "github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/serverproc"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/mongostore"
)

// The 3-member replica set the embedded shop moves into (`migrate --to mongo`), started by the
// first test that needs it and stopped by TestMain; its mongods die with the test binary.
var (
	dualMongoOnce sync.Once
	dualMongoURI  string
	dualMongoErr  error
	stopDualMongo func()
)

func dualMongo(t *testing.T) string {
	t.Helper()
	dualMongoOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		set, stop, err := mongolauncher.StartShared(ctx, mongolauncher.Options{Members: 3, BasePort: mongolauncher.MigrateDualTestPort})
		if err != nil {
			dualMongoErr = fmt.Errorf("start a 3-member replica set on port %d: %w", mongolauncher.MigrateDualTestPort, err)
			return
		}
		dualMongoURI, stopDualMongo = set.URI(), stop
	})
	if dualMongoErr != nil {
		t.Fatal(dualMongoErr)
	}
	return dualMongoURI
}

// `migrate --to mongo`: the embedded demo shop moves sessions, carts, history and events to a
// 3-member replica set with HTTP traffic running (carts, checkouts, events, logins): dual
// writes on, the backfill SIGKILLed and resumed, verify with 0 differences, cutover (kept by a
// restart) with what was acknowledged before the move served from MongoDB, and a rollback
// after which the embedded store serves what was written while MongoDB served.
func TestMigrateEmbeddedShopToMongoWithTraffic(t *testing.T) {
	ctx := context.Background()
	uri := dualMongo(t)
	dbName := fmt.Sprintf("dual_%d", time.Now().UnixNano()%1_000_000) // a fresh database per run (-count)
	dst, closeDst, err := migrate.OpenMongoTarget(ctx, uri, dbName)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDst()

	var o serveOptions
	o.backend.register(&cobra.Command{})
	o.backend.dataDir = t.TempDir()
	o.backend.mongoURI, o.backend.mongoDB, o.backend.migrations, o.backend.migrationsTo = uri, dbName, true, "mongo"
	o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", true, "text", "migrate-dual-admin-token"
	o.shutdownTimeout, o.purgeEvery, o.migrationPoll = 10*time.Second, time.Hour, 200*time.Millisecond
	o.demo = demo.Options{Products: 500, Categories: 5, Users: 40, Seed: 3}
	store := []string{"--data-dir", o.backend.dataDir, "--mongo-uri", uri, "--mongo-db", dbName, "--to", "mongo", "--progress", "lines"}

	shop := startLiveShop(t, o)
	defer func() { shop.stop() }()

	// Acknowledged before the move: a user's session, a cart line, an order (its history
	// entry) and an event.
	c := flowClient{t: t, api: shop.api, admin: o.adminToken}
	var guest struct{ Token string }
	c.do("POST", "/v1/sessions", "", "", 201, &guest)
	product := firstProduct(t, c)
	c.do("POST", "/v1/users", guest.Token, `{"email":"early@example.com","password":"correct horse"}`, 201, nil)
	var login struct{ Token string }
	c.do("POST", "/v1/login", guest.Token, `{"email":"early@example.com","password":"correct horse"}`, 200, &login)
	early := login.Token
	c.do("PUT", "/v1/cart/items/"+product, early, `{"quantity":1}`, 200, nil)
	var ord struct{ ID string }
	c.idem = "dual-early-order"
	c.do("POST", "/v1/orders", early, `{"zone":"eu-west"}`, 201, &ord)
	c.idem = ""
	c.do("PUT", "/v1/cart/items/"+product, early, `{"quantity":3}`, 200, nil)
	c.do("POST", "/v1/events", early, `{"type":"view","product_id":"`+product+`"}`, 201, nil)
	shop.outboxDrained()

	stopTraffic := startTraffic(t, shop.api, o.adminToken, 30)
	trafficStopped := false
	defer func() {
		if !trafficStopped {
			stopTraffic()
		}
	}()
	// Enough rows that the rate-capped backfill is still running when it is killed.
	src, err := migrate.OpenSource(ctx, o.backend.sqlitePath())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	eventually.True(t, 2*time.Minute, "traffic to write 40 sessions and 400 rows to move", func() bool {
		total := int64(0)
		for _, f := range migrate.MongoFamilies {
			n, err := src.Count(ctx, f)
			if err != nil || f == migrate.Sessions && n < 40 {
				return false
			}
			total += n
		}
		return total >= 400
	})

	checkpoints := func() int {
		n := 0
		for _, f := range migrate.MongoFamilies {
			cps, err := dst.Checkpoints(ctx, "1", f)
			if err != nil {
				t.Fatal(err)
			}
			n += len(cps)
		}
		return n
	}
	runArgs := []string{"--family", "all", "--ranges", "16", "--workers", "1", "--max-rows-per-sec", "10", "--writers-wait", "30s"}
	cmd := shardmartCmd(append(append([]string{"migrate", "run"}, store...), runArgs...)...)
	var outb serverproc.Output
	cmd.Stdout, cmd.Stderr = &outb, &outb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	eventually.NoError(t, 3*time.Minute, func() error {
		if n := checkpoints(); n < 3 {
			select {
			case err := <-exited:
				return eventually.Stop(fmt.Errorf("run ended before it was killed (%v):\n%s", err, outb.String()))
			default:
				return fmt.Errorf("run made no progress (%d checkpoints):\n%s", n, outb.String())
			}
		}
		return nil
	})
	_ = cmd.Process.Kill() // SIGKILL
	<-exited
	killedAt := checkpoints()
	t.Logf("run killed after %d checkpoints:\n%s", killedAt, lastLines(outb.String(), 4))
	out, err := migrateCLI(t, store, "run", "--family", "all", "--ranges", "16", "--workers", "4", "--max-rows-per-sec", "100", "--writers-wait", "30s")
	if err != nil {
		t.Fatalf("resumed run: %v\n%s", err, out)
	}
	if !strings.Contains(out, "resuming run 1") {
		t.Errorf("the second run did not resume run 1:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)\b([1-9]\d*) of \d+ ranges were done before`).MatchString(out) {
		t.Errorf("the resumed run found no range done before:\n%s", out)
	}
	t.Logf("resumed run:\n%s", lastLines(out, 8))

	rep := stopTraffic()
	trafficStopped = true
	sent := rep.Total.OK + rep.Total.Expected
	t.Logf("traffic during the migration: %d requests answered, %d failed (first: %s)", sent, rep.Total.Failed, rep.Total.FirstError)
	if sent < 100 {
		t.Fatalf("only %d requests of traffic ran during the migration", sent)
	}
	shop.outboxDrained()

	out, err = migrateCLI(t, store, "verify", "--family", "all", "--ranges", "16", "--explain")
	t.Logf("verify:\n%s", out)
	if err != nil {
		t.Fatalf("verify: %v\n%s\nshop errors:\n%s", err, out, grepLines(shop.logs.String(), "level=ERROR"))
	}
	for _, f := range migrate.MongoFamilies {
		m := regexp.MustCompile(`(?m)^` + string(f) + `: source (\d+) rows, target (\d+) rows, \d+ ranges, 0 differing ranges, 0 differing keys$`).FindStringSubmatch(out)
		if m == nil || m[1] != m[2] || m[1] == "0" {
			t.Errorf("verify of %s is not a clean, non-empty match:\n%s", f, out)
		}
	}

	out, err = migrateCLI(t, store, "cutover", "--family", "all", "--writers-wait", "30s")
	if err != nil {
		t.Fatalf("cutover: %v\n%s", err, out)
	}
	// Served from MongoDB: what was acknowledged before the move is there.
	readsEarly := func(when string) {
		t.Helper()
		var cartNow struct {
			Items []struct{ Quantity int64 }
		}
		c.do("GET", "/v1/cart", early, "", 200, &cartNow) // the session issued before the move is accepted
		if len(cartNow.Items) != 1 || cartNow.Items[0].Quantity != 3 {
			t.Errorf("%s: the cart edited before the move shows %+v, want 1 line of 3", when, cartNow.Items)
		}
		var hist struct{ Items []struct{ ID string } }
		c.do("GET", "/v1/orders?limit=10", early, "", 200, &hist)
		if len(hist.Items) != 1 || hist.Items[0].ID != ord.ID {
			t.Errorf("%s: history %+v, want order %s", when, hist.Items, ord.ID)
		}
		var evs struct{ Items []struct{ Type string } }
		c.do("GET", "/v1/events", early, "", 200, &evs)
		if len(evs.Items) != 1 {
			t.Errorf("%s: the user lists %d events, want the 1 posted before the move", when, len(evs.Items))
		}
	}
	readsEarly("after cutover")
	var fresh struct{ Token string }
	c.do("POST", "/v1/login", guestToken(t, c), `{"email":"early@example.com","password":"correct horse"}`, 200, &fresh)
	mst, err := mongostore.Open(ctx, mongostore.Options{URI: uri, Database: dbName})
	if err != nil {
		t.Fatal(err)
	}
	defer mst.Close()
	if _, err := mst.Sessions().GetSession(ctx, session.IDFromToken(fresh.Token), time.Now()); err != nil {
		t.Fatalf("the session issued after cutover is not in MongoDB: %v", err)
	}

	// A restart keeps the cutover.
	shop.stop()
	shop = startLiveShop(t, o)
	c.api = shop.api
	readsEarly("after a restart")
	c.do("POST", "/v1/events", fresh.Token, `{"type":"view","product_id":"`+product+`"}`, 201, nil)
	c.do("PUT", "/v1/cart/items/"+product, fresh.Token, `{"quantity":5}`, 200, nil)

	// Rollback: the embedded store serves again, with what was written while MongoDB served.
	out, err = migrateCLI(t, store, "cutover", "--rollback", "--family", "all", "--writers-wait", "30s")
	if err != nil {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	var evsBack struct{ Items []struct{ Type string } }
	c.do("GET", "/v1/events", fresh.Token, "", 200, &evsBack) // the session issued during the cutover
	if len(evsBack.Items) != 2 {
		t.Errorf("after the rollback the user lists %d events, want 2 (one before the move, one during the cutover)", len(evsBack.Items))
	}
	var cartBack struct {
		Items []struct{ Quantity int64 }
	}
	c.do("GET", "/v1/cart", fresh.Token, "", 200, &cartBack)
	if len(cartBack.Items) != 1 || cartBack.Items[0].Quantity != 5 {
		t.Errorf("after the rollback the cart shows %+v, want the 1 line of 5 edited during the cutover", cartBack.Items)
	}
	if out, err = migrateCLI(t, store, "verify", "--family", "all", "--ranges", "16"); err != nil {
		t.Fatalf("verify after the rollback: %v\n%s", err, out)
	}
	out, err = migrateCLI(t, store, "status")
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, f := range migrate.MongoFamilies {
		if !regexp.MustCompile(`(?m)^` + string(f) + `\s+verified\s+sqlite\s+1\s`).MatchString(out) {
			t.Errorf("status of %s after the rollback and a verify:\n%s", f, out)
		}
	}
}

// guestToken is a new guest session's token.
func guestToken(t *testing.T, c flowClient) string {
	t.Helper()
	var s struct{ Token string }
	c.do("POST", "/v1/sessions", "", "", 201, &s)
	return s.Token
}
