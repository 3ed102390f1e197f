package dump

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/backup"
	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/shop"
)

// drillShoppers place orders, edit carts and log in through the HTTP API while the backup
// runs.
const (
	drillShoppers = 6
	drillStock    = 1_000_000
	drillZone     = "eu-west"
)

// TestDrillBackupUnderLoadRestoresOnAnotherSet is the restore drill: the demo shop on a
// 3-member set, shoppers ordering over HTTP during the backup, the restore on a second set.
// The restored database must hold exactly the orders committed at or before the backup's
// cluster time (each order's commit time is read from the source's oplog), every order
// acknowledged before consistent_at, stock and sales that add up, the indexes and options of
// every collection, and accounts that log in.
func TestDrillBackupUnderLoadRestoresOnAnotherSet(t *testing.T) {
	ctx := testContext(t, 8*time.Minute)
	db := freshDB("drill")
	sh := openShop(t, ctx, source.URI(), db)
	seedStart := time.Now()
	// The demo data set at under half its default size: the drill's properties do not depend
	// on it, and seeding is most of the test's time.
	opt := demo.Defaults()
	opt.Products, opt.Users = 2000, 100
	res, err := demo.Seed(ctx, sh.Stores, sh.Orders, sh.Carts, opt)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	if _, err := sh.Projector.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	t.Logf("demo shop seeded in %s: %d products, %d users, %d orders, %d events",
		time.Since(seedStart).Round(time.Millisecond), res.Products, res.Users, res.Orders, res.Events)

	api := httptest.NewServer(httpapi.New(httpapi.Deps{Services: sh.API(), AdminToken: "x", Logger: slog.New(slog.DiscardHandler)}))
	defer api.Close()
	c := &client{t: t, base: api.URL}
	var products []string
	for i := range 4 {
		id := fmt.Sprintf("drill-%d", i)
		c.call(ctx, "POST", "/v1/products", "", "", fmt.Sprintf(`{"id":%q,"name":"Drill %d","category":"drill","price":"3.25","stock":{%q:%d}}`, id, i, drillZone, drillStock), 201, nil)
		products = append(products, id)
	}
	shoppers := make([]*shopper, drillShoppers)
	for i := range shoppers {
		shoppers[i] = &shopper{email: fmt.Sprintf("drill-%d@example.com", i), password: fmt.Sprintf("pw before backup %d", i)}
		tok := c.session(ctx)
		c.call(ctx, "POST", "/v1/users", tok, "", fmt.Sprintf(`{"email":%q,"password":%q}`, shoppers[i].email, shoppers[i].password), 201, nil)
		shoppers[i].token = c.login(ctx, tok, shoppers[i].email, shoppers[i].password, 200)
	}
	initial := stockPlusSold(t, ctx, sourceClient.Database(db))

	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var placed atomic.Int64
	for i, s := range shoppers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.shop(loadCtx, c, i, products, &placed)
		}()
	}
	defer func() { stopLoad(); wg.Wait() }()
	waitOrders(t, ctx, &placed, 10)
	// consistent_at is the cluster time's second: some orders must be acknowledged in an
	// earlier second for the check of those acknowledged before it to mean anything.
	for time.Since(firstAck(shoppers)) < 1100*time.Millisecond {
		waitOrders(t, ctx, &placed, 1)
	}

	out := filepath.Join(t.TempDir(), "backup")
	var log strings.Builder
	bo := BackupOptions{Database: db, Out: out, Progress: &log, ProgressEvery: time.Second,
		// Orders keep coming between the collections' reads, so the snapshot is tested: the
		// collections read last are read well after orders the snapshot must leave out.
		afterCollection: func(string) { waitOrders(t, ctx, &placed, 2) },
	}
	load0 := loadavg()
	backupStart := time.Now()
	m, err := Backup(ctx, sourceClient, bo)
	backupTook := time.Since(backupStart)
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, log.String())
	}
	waitOrders(t, ctx, &placed, 5)
	stopLoad()
	wg.Wait()
	t.Logf("backup under load (%d shoppers) in %s, load average %s -> %s:\n%s", drillShoppers, backupTook.Round(time.Millisecond), load0, loadavg(), log.String())
	at, err := ParseTimestamp(m.Meta[MetaClusterTime])
	if err != nil {
		t.Fatal(err)
	}
	if !m.ConsistentAt.Equal(time.Unix(int64(at.T), 0)) {
		t.Errorf("consistent_at %s, cluster time %s", m.ConsistentAt, m.Meta[MetaClusterTime])
	}

	// The same database again, no load and no pauses: what a backup of the demo shop takes.
	load0 = loadavg()
	quietStart := time.Now()
	quiet, err := Backup(ctx, sourceClient, BackupOptions{Database: db, Out: filepath.Join(t.TempDir(), "quiet")})
	if err != nil {
		t.Fatalf("backup without load: %v", err)
	}
	var docs, bytes int64
	for _, n := range quiet.Counts {
		docs += n
	}
	for _, f := range quiet.Files {
		bytes += f.Bytes
	}
	t.Logf("backup without load in %s (%d documents, %d bytes), load average %s", time.Since(quietStart).Round(time.Millisecond), docs, bytes, load0)
	// The advice for a long backup: read from a secondary (the cluster time still comes from
	// the primary).
	secondary, err := mongo.Connect(options.Client().ApplyURI(source.URI() + "&readPreference=secondary"))
	if err != nil {
		t.Fatal(err)
	}
	defer secondary.Disconnect(context.WithoutCancel(ctx))
	quietAt, err := ParseTimestamp(quiet.Meta[MetaClusterTime])
	if err != nil {
		t.Fatal(err)
	}
	fromSecondary, err := Backup(ctx, secondary, BackupOptions{Database: db, Out: filepath.Join(t.TempDir(), "secondary"), AtClusterTime: &quietAt})
	if err != nil {
		t.Fatalf("backup from a secondary: %v", err)
	}
	if !maps.Equal(fromSecondary.Counts, quiet.Counts) {
		t.Errorf("backup from a secondary counts %v, from the primary %v", fromSecondary.Counts, quiet.Counts)
	}

	restored := freshDB("restored")
	load0 = loadavg()
	restoreStart := time.Now()
	log.Reset()
	if _, err := Restore(ctx, targetClient, RestoreOptions{Dir: out, Database: restored, Progress: &log, ProgressEvery: time.Second}); err != nil {
		t.Fatalf("restore: %v\n%s", err, log.String())
	}
	t.Logf("restore in %s, load average %s:\n%s", time.Since(restoreStart).Round(time.Millisecond), load0, log.String())
	rdb := targetClient.Database(restored)

	t.Run("orders are those committed at or before the cluster time", func(t *testing.T) {
		commits := orderCommits(t, ctx, db)
		have := ids(t, ctx, rdb.Collection("orders"))
		var before, after int
		for id, ts := range commits {
			in := ts.Compare(at) <= 0
			if in {
				before++
			} else {
				after++
			}
			if in != have[id] {
				t.Errorf("order %s committed at %s: restored %v, want %v (cluster time %s)", id, tsString(ts), have[id], in, tsString(at))
			}
		}
		for id := range have {
			if _, ok := commits[id]; !ok {
				t.Errorf("restored order %s has no insert in the source's oplog", id)
			}
		}
		if after == 0 {
			t.Errorf("no order committed after the cluster time: the load did not overlap the backup")
		}
		var acked, ackedBefore int
		for _, s := range shoppers {
			for _, o := range s.orders {
				acked++
				if o.acked.Before(m.ConsistentAt) {
					ackedBefore++
					if !have[o.id] {
						t.Errorf("order %s acknowledged at %s, before consistent_at %s, is not restored", o.id, o.acked.Format(time.RFC3339Nano), m.ConsistentAt.Format(time.RFC3339))
					}
				}
				if o.sent.After(m.ConsistentAt.Add(time.Second)) && have[o.id] {
					t.Errorf("order %s sent at %s, after the cluster time's second %s, is restored", o.id, o.sent.Format(time.RFC3339Nano), m.ConsistentAt.Format(time.RFC3339))
				}
			}
		}
		if ackedBefore == 0 || ackedBefore == acked {
			t.Errorf("%d of %d acknowledged orders before consistent_at: the load did not overlap the backup", ackedBefore, acked)
		}
		t.Logf("%d orders committed at or before the cluster time, %d after; %d of the shoppers' %d acknowledged orders before consistent_at", before, after, ackedBefore, acked)
	})

	t.Run("stock plus sold is the initial stock", func(t *testing.T) {
		got := stockPlusSold(t, ctx, rdb)
		for p, want := range initial {
			if got[p] != want {
				t.Errorf("product %s: restored stock + sold = %d, want %d", p, got[p], want)
			}
		}
		if len(got) != len(initial) {
			t.Errorf("%d products restored, %d before the load", len(got), len(initial))
		}
	})

	t.Run("indexes and options are the source's", func(t *testing.T) {
		for coll := range m.Counts {
			if got, want := indexSpecs(t, ctx, rdb.Collection(coll)), indexSpecs(t, ctx, sourceClient.Database(db).Collection(coll)); !slices.Equal(got, want) {
				t.Errorf("%s indexes:\n got %v\nwant %v", coll, got, want)
			}
		}
		if got, want := collOptions(t, ctx, rdb), collOptions(t, ctx, sourceClient.Database(db)); !maps.Equal(got, want) {
			t.Errorf("collection options:\n got %v\nwant %v", got, want)
		}
	})

	t.Run("accounts set before the backup log in on the restored shop", func(t *testing.T) {
		rsh := openShop(t, ctx, target.URI(), restored)
		rapi := httptest.NewServer(httpapi.New(httpapi.Deps{Services: rsh.API(), AdminToken: "x", Logger: slog.New(slog.DiscardHandler)}))
		defer rapi.Close()
		rc := &client{t: t, base: rapi.URL}
		s := shoppers[0]
		rc.login(ctx, rc.session(ctx), s.email, s.password, 200)
		rc.login(ctx, rc.session(ctx), s.email, "not the password", 401)
		rc.login(ctx, rc.session(ctx), "demo-0@example.com", res.Password, 200)
	})

	t.Run("a restore into a database with collections is refused", func(t *testing.T) {
		if _, err := Restore(ctx, targetClient, RestoreOptions{Dir: out, Database: restored}); !errors.Is(err, ErrNotEmpty) {
			t.Errorf("restore into the restored database: %v, want ErrNotEmpty", err)
		}
	})

	t.Run("a changed byte fails the restore before it loads anything", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad")
		if err := os.CopyFS(bad, os.DirFS(out)); err != nil {
			t.Fatal(err)
		}
		flipByte(t, filepath.Join(bad, db, "orders.bson"), 100)
		into := freshDB("tampered")
		_, err := Restore(ctx, targetClient, RestoreOptions{Dir: bad, Database: into})
		if !errors.Is(err, backup.ErrMismatch) {
			t.Fatalf("restore of a backup with a changed byte: %v, want ErrMismatch", err)
		}
		if !strings.Contains(err.Error(), "orders.bson") {
			t.Errorf("error %q does not name the changed file", err)
		}
		assertNoCollections(t, ctx, into)
	})
}

// openShop opens the shop with every family on MongoDB.
func openShop(t *testing.T, ctx context.Context, uri, db string) *shop.Shop {
	t.Helper()
	cfg := placement.Config{}
	for _, f := range placement.Families {
		cfg[f] = placement.Mongo
	}
	sh, err := shop.Open(ctx, shop.Config{Placement: cfg, Backends: placement.Options{MongoURI: uri, MongoDatabase: db}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	return sh
}

// shopper is one simulated customer of the drill.
type shopper struct {
	email, password, token string
	mu                     sync.Mutex // guards orders while the shopper runs
	orders                 []placedOrder
}

// placedOrder is an order the API acknowledged (201), with when it was sent and answered.
type placedOrder struct {
	id          string
	sent, acked time.Time
}

// shop loops until ctx ends: a cart edit, an order with an Idempotency-Key, every third
// round a fresh login.
func (s *shopper) shop(ctx context.Context, c *client, n int, products []string, placed *atomic.Int64) {
	for i := 0; ctx.Err() == nil; i++ {
		p := products[(n+i)%len(products)]
		if !c.try(ctx, "PUT", "/v1/cart/items/"+p, s.token, "", `{"quantity":2}`, 200, nil) {
			continue
		}
		if i%2 == 0 { // an edit: another line, then its removal
			other := products[(n+i+1)%len(products)]
			c.try(ctx, "PUT", "/v1/cart/items/"+other, s.token, "", `{"quantity":1}`, 200, nil)
			c.try(ctx, "DELETE", "/v1/cart/items/"+other, s.token, "", "", 200, nil)
		}
		var o struct{ ID string }
		sent := time.Now()
		if c.try(ctx, "POST", "/v1/orders", s.token, fmt.Sprintf("drill-%d-%d", n, i), fmt.Sprintf(`{"zone":%q}`, drillZone), 201, &o) {
			s.mu.Lock()
			s.orders = append(s.orders, placedOrder{id: o.ID, sent: sent, acked: time.Now()})
			s.mu.Unlock()
			placed.Add(1)
		}
		if i%3 == 2 {
			var tok struct{ Token string }
			sess := c.session(ctx)
			if sess != "" && c.try(ctx, "POST", "/v1/login", sess, "", fmt.Sprintf(`{"email":%q,"password":%q}`, s.email, s.password), 200, &tok) {
				s.token = tok.Token
			}
		}
	}
}

// firstAck is when the shoppers' first order was acknowledged; call it while they shop.
func firstAck(shoppers []*shopper) time.Time {
	first := time.Now()
	for _, s := range shoppers {
		s.mu.Lock()
		if len(s.orders) > 0 && s.orders[0].acked.Before(first) {
			first = s.orders[0].acked
		}
		s.mu.Unlock()
	}
	return first
}

// waitOrders waits until n more orders are acknowledged.
func waitOrders(t *testing.T, ctx context.Context, placed *atomic.Int64, n int64) {
	t.Helper()
	want := placed.Load() + n
	deadline := time.Now().Add(time.Minute)
	for placed.Load() < want {
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Errorf("the shoppers placed no %d orders in a minute (%d in all)", n, placed.Load())
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// client calls the shop's HTTP API.
type client struct {
	t    *testing.T
	base string
}

// try sends one request and tells whether it got want; another answer during the load is
// logged, never fatal: what the assertions read is what the API acknowledged.
func (c *client) try(ctx context.Context, method, path, token, idem, body string, want int, into any) bool {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Error(err)
		return false
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	req.Header.Set("X-Admin-Token", "x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			c.t.Logf("%s %s: %v", method, path, err)
		}
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.t.Logf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		return false
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			c.t.Errorf("%s %s: decode %s: %v", method, path, b, err)
			return false
		}
	}
	return true
}

// call is try outside the load: anything but want fails the test.
func (c *client) call(ctx context.Context, method, path, token, idem, body string, want int, into any) {
	c.t.Helper()
	if !c.try(ctx, method, path, token, idem, body, want, into) {
		c.t.Fatalf("%s %s did not answer %d", method, path, want)
	}
}

// session starts a guest session and returns its token ("" when the API did not answer 201).
func (c *client) session(ctx context.Context) string {
	var s struct{ Token string }
	c.try(ctx, "POST", "/v1/sessions", "", "", "", 201, &s)
	return s.Token
}

// login logs in from the session tok and requires the status want; it returns the user's
// token.
func (c *client) login(ctx context.Context, tok, email, password string, want int) string {
	c.t.Helper()
	var l struct{ Token string }
	c.call(ctx, "POST", "/v1/login", tok, "", fmt.Sprintf(`{"email":%q,"password":%q}`, email, password), want, &l)
	return l.Token
}

// stockPlusSold is, per product, the stock of every zone plus the quantities of its orders
// that are not cancelled: the same at every consistent point of the shop.
func stockPlusSold(t *testing.T, ctx context.Context, db *mongo.Database) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	var products []struct {
		ID    string           `bson:"_id"`
		Stock map[string]int64 `bson:"stock"`
	}
	findAll(t, ctx, db.Collection("products"), bson.D{}, &products)
	for _, p := range products {
		for _, q := range p.Stock {
			out[p.ID] += q
		}
	}
	var orders []struct {
		Status string `bson:"status"`
		Items  []struct {
			ProductID string `bson:"product_id"`
			Quantity  int64  `bson:"quantity"`
		} `bson:"items"`
	}
	findAll(t, ctx, db.Collection("orders"), bson.D{{Key: "status", Value: bson.D{{Key: "$ne", Value: "cancelled"}}}}, &orders)
	for _, o := range orders {
		for _, it := range o.Items {
			out[it.ProductID] += it.Quantity
		}
	}
	return out
}

func findAll(t *testing.T, ctx context.Context, coll *mongo.Collection, filter bson.D, into any) {
	t.Helper()
	cur, err := coll.Find(ctx, filter)
	if err != nil {
		t.Fatal(err)
	}
	if err := cur.All(ctx, into); err != nil {
		t.Fatal(err)
	}
}

// orderCommits reads the source's oplog: the commit time of every insert into db.orders
// (the shop inserts orders in transactions, whose oplog entry is an applyOps at the commit).
func orderCommits(t *testing.T, ctx context.Context, db string) map[string]bson.Timestamp {
	t.Helper()
	ns := db + ".orders"
	var entries []struct {
		TS bson.Timestamp `bson:"ts"`
		Op string         `bson:"op"`
		NS string         `bson:"ns"`
		O  struct {
			ID         bson.RawValue `bson:"_id"`
			PartialTxn bool          `bson:"partialTxn"`
			ApplyOps   []struct {
				Op string   `bson:"op"`
				NS string   `bson:"ns"`
				O  bson.Raw `bson:"o"`
			} `bson:"applyOps"`
		} `bson:"o"`
	}
	filter := bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "ns", Value: ns}, {Key: "op", Value: "i"}},
		bson.D{{Key: "o.applyOps.ns", Value: ns}},
	}}}
	findAll(t, ctx, sourceClient.Database("local").Collection("oplog.rs"), filter, &entries)
	out := map[string]bson.Timestamp{}
	for _, e := range entries {
		if e.O.PartialTxn {
			t.Fatalf("a multi-entry transaction at %s: this check reads single-entry commits only", tsString(e.TS))
		}
		if e.Op == "i" {
			out[e.O.ID.StringValue()] = e.TS
			continue
		}
		for _, op := range e.O.ApplyOps {
			if op.NS == ns && op.Op == "i" {
				out[op.O.Lookup("_id").StringValue()] = e.TS
			}
		}
	}
	return out
}

// ids is the set of a collection's _ids.
func ids(t *testing.T, ctx context.Context, coll *mongo.Collection) map[string]bool {
	t.Helper()
	var docs []struct {
		ID string `bson:"_id"`
	}
	findAll(t, ctx, coll, bson.D{}, &docs)
	out := map[string]bool{}
	for _, d := range docs {
		out[d.ID] = true
	}
	return out
}

// indexSpecs lists a collection's indexes as canonical Extended JSON, sorted.
func indexSpecs(t *testing.T, ctx context.Context, coll *mongo.Collection) []string {
	t.Helper()
	cur, err := coll.Indexes().List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var specs []bson.Raw
	if err := cur.All(ctx, &specs); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.String()
	}
	slices.Sort(out)
	return out
}

// collOptions maps each collection to its listCollections options.
func collOptions(t *testing.T, ctx context.Context, db *mongo.Database) map[string]string {
	t.Helper()
	cs, err := listCollections(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range cs {
		b, err := bson.MarshalExtJSON(bson.D{{Key: "o", Value: c.Options}}, true, false)
		if err != nil {
			t.Fatal(err)
		}
		out[c.Name] = string(b)
	}
	return out
}

// flipByte changes one byte of a file in place.
func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

// assertNoCollections fails unless the target's database db has no collection.
func assertNoCollections(t *testing.T, ctx context.Context, db string) {
	t.Helper()
	names, err := targetClient.Database(db).ListCollectionNames(ctx, bson.D{})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) > 0 {
		t.Errorf("database %s has collections %v after a refused restore", db, names)
	}
}

// loadavg is /proc/loadavg's first three fields.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}
