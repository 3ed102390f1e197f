package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/eventually"
	mongolauncher "github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/mongodb/shardtest"
	"github.com/shardmart/shardmart/internal/mongomove"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/serverproc"
	"github.com/shardmart/shardmart/internal/sharding"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// The embedded demo shop moves its orders family (and the catalog) to a 3-member replica set
// with orders, cart edits and logins running through serve's HTTP API: the migrator is
// SIGKILLed mid-copy and resumed, verify finds no difference, cutover and a restart of serve
// on MongoDB end the freeze; then the README flow runs through the moved shop. The rollback
// subtest abandons a killed move instead. Both check that every acknowledged order is in the
// store that holds the family, that writes in the freeze got 503 with Retry-After and were
// placed once on retry, and that stock + sold = initial.
func TestMoveEmbeddedShopToMongo(t *testing.T) {
	set := mongolauncher.ForTest(t, mongolauncher.Options{Members: 3, BasePort: mongolauncher.MoveTestPort})
	var moved string
	t.Run("move", func(t *testing.T) { moved = moveEmbeddedShop(t, set, false) })
	t.Run("rollback", func(t *testing.T) { moveEmbeddedShop(t, set, true) })
	t.Run("sharded", func(t *testing.T) {
		if moved == "" {
			t.Fatal("the move subtest did not finish: nothing to shard")
		}
		shardMovedCollections(t, set, moved)
	})
}

// shardMovedCollections puts the moved shop's collections on the router-less sharded test
// cluster as `mongo apply` and a mongos would: sharding.Apply creates every collection sharded
// on its spec key with its indexes, and the test router places each document on the shard
// that owns its chunk. Every document must land, and the hashed collections must spread.
func shardMovedCollections(t *testing.T, set *mongolauncher.Set, db string) {
	ctx := eventually.Context(t, 5*time.Minute)
	c := mongolauncher.ClusterForTest(t, mongolauncher.ClusterOptions{Shards: 2, BasePort: mongolauncher.MoveClusterTestPort})
	r, err := shardtest.Connect(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.WithoutCancel(ctx))
	shardtest.BalancerOff(ctx, t, r)
	spec, err := sharding.NewSpec(sharding.Options{Database: db, Tiers: map[string][]string{"fast": {"sh0"}, "standard": {"sh1"}}})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if _, err := sharding.Apply(ctx, r, spec, &out, false); err != nil {
		t.Fatalf("apply: %v\n%s", err, out.String())
	}
	src, err := mongo.Connect(mongostore.ClientOptions(set.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Disconnect(context.WithoutCancel(ctx)) }()
	for _, coll := range spec.Collections {
		if !slices.Contains(mongostore.MovedCollections, coll.Name) {
			continue
		}
		cur, err := src.Database(db).Collection(coll.Name).Find(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		var docs []bson.D
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatal(err)
		}
		ns := spec.Namespace(coll.Name)
		info, err := r.Collection(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Sharded || sharding.ShellValue(info.Key) != sharding.ShellValue(coll.Key.Doc()) {
			t.Errorf("%s: sharded=%t on %s, want %s", ns, info.Sharded, sharding.ShellValue(info.Key), coll.Key)
		}
		if len(docs) == 0 {
			continue
		}
		placed, err := r.Place(ctx, ns, docs)
		if err != nil {
			t.Fatalf("place %s: %v", ns, err)
		}
		stats, err := r.Stats(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		var owned int64
		for _, st := range stats {
			owned += st.Owned()
		}
		if owned != int64(len(docs)) {
			t.Errorf("%s: %d documents owned on the shards, %d moved", ns, owned, len(docs))
		}
		if hashed := strings.Contains(sharding.ShellValue(info.Key), "hashed"); hashed && len(docs) >= 50 && len(placed) < 2 {
			t.Errorf("%s (hashed key %s): %d documents all on %v, want them spread over both shards", ns, sharding.ShellValue(info.Key), len(docs), placed)
		}
		t.Logf("%s: %d documents on %v, key %s", ns, len(docs), placed, sharding.ShellValue(info.Key))
	}
}

// The move to MongoDB refuses what it cannot do before it touches a store.
func TestMoveToMongoRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "run", "--to", "mongo", "--family", "orders", "--from", "mongo", "--mongo-uri", "mongodb://127.0.0.1:1"}, "moves from the embedded store"},
		{[]string{"migrate", "run", "--to", "mongo", "--family", "orders"}, "needs --mongo-uri"},
		{[]string{"migrate", "cutover", "--to", "mongo", "--family", "orders,catalog"}, "needs --mongo-uri"},
	} {
		var out strings.Builder
		root := NewRootCmd(IO{Out: &out, Err: &out})
		root.SetArgs(append(tc.args, "--data-dir", t.TempDir()))
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// moveTraffic places orders (each key retried until placed), edits carts and logs in, as
// buyers with accounts made before the move.
type moveTraffic struct {
	api      atomic.Pointer[string]
	products []string
	zone     string
	users    map[string]bool // the buyers' ids

	mu          sync.Mutex
	acked       map[string]string // idempotency key -> order id
	ackTimes    []time.Time
	frozen      int // 503 answers to orders
	badFrozen   []string
	logins      int
	unexpected  []string
	stop        chan struct{}
	wg          sync.WaitGroup
	ackedSignal chan struct{}
}

func (tr *moveTraffic) send(method, path, token, body, idem string) (int, []byte, http.Header, error) {
	return flowClient{api: *tr.api.Load()}.send(method, path, token, body, idem)
}

func (tr *moveTraffic) note(format string, args ...any) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.unexpected) < 20 {
		tr.unexpected = append(tr.unexpected, fmt.Sprintf(format, args...))
	}
}

// buyer is one worker: its own account, its cart, an order at a time.
func (tr *moveTraffic) buyer(i int, token, email, password string) {
	defer tr.wg.Done()
	for n := 0; ; n++ {
		select {
		case <-tr.stop:
			return
		default:
		}
		key := fmt.Sprintf("buyer%d-%d", i, n)
		product := tr.products[(i+n)%len(tr.products)]
		tr.retry(func() (bool, error) {
			status, b, _, err := tr.send("PUT", "/v1/cart/items/"+product, token, `{"quantity":1}`, "")
			if err != nil || status == 503 || status == 409 {
				return false, nil
			}
			if status != 200 {
				return true, fmt.Errorf("cart: %d %s", status, b)
			}
			return true, nil
		})
		tr.retry(func() (bool, error) {
			status, b, h, err := tr.send("POST", "/v1/orders", token, `{"zone":"`+tr.zone+`"}`, key)
			switch {
			case err != nil || status == 409:
				return false, nil // serve restarting, or the cart's checkout still held
			case status == 503:
				tr.mu.Lock()
				tr.frozen++
				if h.Get("Retry-After") == "" || h.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(b), "unavailable") {
					tr.badFrozen = append(tr.badFrozen, fmt.Sprintf("%v %s", h, b))
				}
				tr.mu.Unlock()
				return false, nil
			case status == 201 || status == 200:
				var o struct{ ID string }
				if err := json.Unmarshal(b, &o); err != nil {
					return true, err
				}
				tr.mu.Lock()
				tr.acked[key] = o.ID
				tr.ackTimes = append(tr.ackTimes, time.Now())
				tr.mu.Unlock()
				select {
				case tr.ackedSignal <- struct{}{}:
				default:
				}
				return true, nil
			}
			return true, fmt.Errorf("order %s: %d %s", key, status, b)
		})
		if n%5 == 0 {
			tr.retry(func() (bool, error) {
				status, b, _, err := tr.send("POST", "/v1/sessions", "", "", "")
				if err != nil || status == 503 {
					return false, nil
				}
				var s struct{ Token string }
				if err := json.Unmarshal(b, &s); err != nil {
					return true, err
				}
				status, b, _, err = tr.send("POST", "/v1/login", s.Token, `{"email":"`+email+`","password":"`+password+`"}`, "")
				if err != nil || status == 503 {
					return false, nil
				}
				if status != 200 {
					return true, fmt.Errorf("login: %d %s", status, b)
				}
				tr.mu.Lock()
				tr.logins++
				tr.mu.Unlock()
				return true, nil
			})
		}
	}
}

// retry runs op until it is done, within two minutes (a freeze and a restart are shorter).
func (tr *moveTraffic) retry(op func() (done bool, err error)) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		done, err := op()
		if err != nil {
			tr.note("%v", err)
			return
		}
		if done {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tr.note("an operation did not succeed within 2 minutes")
}

func (tr *moveTraffic) ackedCount() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.acked)
}

// waitAcked waits for n more acknowledged orders.
func (tr *moveTraffic) waitAcked(t *testing.T, n int) {
	t.Helper()
	want := tr.ackedCount() + n
	eventually.True(t, 2*time.Minute, fmt.Sprintf("%d acknowledged orders", want), func() bool { return tr.ackedCount() >= want })
}

// moveEmbeddedShop moves (or, with rollback, abandons the move of) a demo shop and returns the
// database it moved into ("" on a rollback).
func moveEmbeddedShop(t *testing.T, set *mongolauncher.Set, rollback bool) string {
	ctx := context.Background()
	db := fmt.Sprintf("moved_%d", time.Now().UnixNano()%1_000_000)
	var o serveOptions
	o.backend.register(&cobra.Command{})
	o.backend.dataDir = t.TempDir()
	o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", true, "text", "move-admin-token-0123456789abcdef"
	o.shutdownTimeout, o.purgeEvery = 10*time.Second, time.Hour
	o.demo = demo.Options{Products: 3000, Categories: 5, Users: 10, Seed: 5}
	shop := startLiveShop(t, o)
	defer func() {
		if shop != nil {
			shop.stop()
		}
	}()
	c := flowClient{t: t, api: shop.api, admin: o.adminToken}

	// Buyers with accounts (passwords set before the move), products with stock to spare.
	zone := demo.Zones[0]
	var page struct{ Items []struct{ ID string } }
	c.do("GET", "/v1/products?category=books&limit=6", "", "", 200, &page)
	tr := &moveTraffic{zone: zone, users: map[string]bool{}, acked: map[string]string{}, stop: make(chan struct{}), ackedSignal: make(chan struct{}, 1)}
	tr.api.Store(&shop.api)
	initial := map[string]int64{}
	for _, p := range page.Items {
		tr.products = append(tr.products, p.ID)
		c.do("POST", "/v1/products/"+p.ID+"/stock", "", `{"zone":"`+zone+`","delta":100000}`, 200, nil)
		var prod struct{ Stock map[string]int64 }
		c.do("GET", "/v1/products/"+p.ID, "", "", 200, &prod)
		initial[p.ID] = prod.Stock[zone]
	}
	login := func(c flowClient, email, password string) string {
		var s, l struct{ Token string }
		c.do("POST", "/v1/sessions", "", "", 201, &s)
		c.do("POST", "/v1/login", s.Token, `{"email":"`+email+`","password":"`+password+`"}`, 200, &l)
		return l.Token
	}
	const buyers = 3
	emails := make([]string, buyers+1)
	for i := range emails {
		emails[i] = fmt.Sprintf("mover-%d@example.com", i)
		var s struct{ Token string }
		c.do("POST", "/v1/sessions", "", "", 201, &s)
		var u struct{ ID string }
		c.do("POST", "/v1/users", s.Token, `{"email":"`+emails[i]+`","password":"password before the move"}`, 201, &u)
		tr.users[u.ID] = true
	}
	// An order whose Idempotency-Key is replayed after the move.
	first := login(c, emails[buyers], "password before the move")
	c.do("PUT", "/v1/cart/items/"+tr.products[0], first, `{"quantity":2}`, 200, nil)
	c.idem = "across-the-move"
	var before struct{ ID string }
	c.do("POST", "/v1/orders", first, `{"zone":"`+zone+`"}`, 201, &before)
	c.idem = ""

	for i := range buyers {
		token := login(c, emails[i], "password before the move")
		tr.wg.Add(1)
		go tr.buyer(i, token, emails[i], "password before the move")
	}
	stopped := false
	stopTraffic := func() {
		if !stopped {
			stopped = true
			close(tr.stop)
			tr.wg.Wait()
		}
	}
	defer stopTraffic()
	tr.waitAcked(t, 10)

	store := []string{"--data-dir", o.backend.dataDir, "--mongo-uri", set.URI(), "--mongo-db", db, "--to", "mongo", "--progress", "lines"}
	out, err := migrateCLI(t, store, "plan")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	for _, want := range []string{"orders", "freeze", "dual-write", "writes stop for about"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}

	// The first run, slowed so that it is certainly killed mid-copy.
	cmd := shardmartCmd(append(append([]string{"migrate", "run"}, store...), "--family", "orders", "--max-rows-per-sec", "1500")...)
	var runOut serverproc.Output
	cmd.Stdout, cmd.Stderr = &runOut, &runOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 2*time.Minute, "the migrator to copy a batch", func() bool { return strings.Contains(runOut.String(), "copy products") })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	t.Logf("killed migrator's output:\n%s", runOut.String())
	out, err = migrateCLI(t, store, "status", "--family", "orders")
	if err != nil || !strings.Contains(out, mongomove.Frozen) {
		t.Fatalf("status after the kill: %v, want the move frozen:\n%s", err, out)
	}
	// The freeze holds with its migrator dead: an order answers 503 with Retry-After.
	frozenBefore := tr.frozen503()
	eventually.True(t, time.Minute, "an order answered 503 in the freeze", func() bool { return tr.frozen503() > frozenBefore })

	src, err := sqlitestore.Open(ctx, o.backend.sqlitePath())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := mongostore.Open(ctx, mongostore.Options{URI: set.URI(), Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	if rollback {
		out, err = migrateCLI(t, store, "cutover", "--family", "orders", "--rollback")
		if err != nil {
			t.Fatalf("rollback: %v\n%s", err, out)
		}
		counts, err := dst.MovedCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for coll, n := range counts {
			if n > 0 && coll != "counters" {
				t.Errorf("after the rollback MongoDB's %s holds %d documents, want none", coll, n)
			}
		}
		tr.waitAcked(t, 10) // the embedded store takes orders again
		stopTraffic()
		checkMoveTraffic(t, tr, initial, before.ID, "across-the-move", emails[buyers], func(fn func(order.Order) error) error {
			snap, err := src.ReadSnapshot(ctx)
			if err != nil {
				return err
			}
			defer snap.Close()
			return snap.Orders(ctx, fn)
		}, c)
		return ""
	}

	out, err = migrateCLI(t, store, "run", "--family", "orders")
	if err != nil || !strings.Contains(out, "resuming run") || !strings.Contains(out, "copied and verified") {
		t.Fatalf("resumed run: %v, want it resumed and verified:\n%s", err, out)
	}
	t.Logf("resumed run:\n%s", out)
	if out, err = migrateCLI(t, store, "verify", "--family", "orders"); err != nil || !strings.Contains(out, "equal on both sides") {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	if out, err = migrateCLI(t, store, "cutover", "--family", "orders"); err != nil {
		t.Fatalf("cutover: %v\n%s", err, out)
	}
	if out, err = migrateCLI(t, store, "cutover", "--family", "orders", "--rollback"); err == nil || !strings.Contains(out, "cut over") {
		t.Errorf("a rollback after cutover: %v, want a refusal naming the cutover:\n%s", err, out)
	}

	// The restart on MongoDB ends the freeze.
	shop.stop()
	shop = nil
	o.backend.placement, o.backend.mongoURI, o.backend.mongoDB = mongomove.Placement, set.URI(), db
	moved := startLiveShop(t, o)
	defer moved.stop()
	tr.api.Store(&moved.api)
	restarted := time.Now()
	tr.waitAcked(t, 10)
	st, err := (&mongomove.Mover{Src: src}).Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr.mu.Lock()
	var firstAfter time.Time
	for _, at := range tr.ackTimes {
		if at.After(restarted) && (firstAfter.IsZero() || at.Before(firstAfter)) {
			firstAfter = at
		}
	}
	tr.mu.Unlock()
	t.Logf("freeze: %s from the freeze's commit to the first order on MongoDB (copy %s, %.0f rows/s; the moved shop was up %s after the freeze; the first run was killed and resumed)",
		firstAfter.Sub(st.FrozenAt).Round(time.Millisecond), st.CopyTime.Round(time.Millisecond), st.RowsPerSec(), restarted.Sub(st.FrozenAt).Round(time.Millisecond))
	stopTraffic()

	mc := flowClient{t: t, api: moved.api, admin: o.adminToken}
	checkMoveTraffic(t, tr, initial, before.ID, "across-the-move", emails[buyers], func(fn func(order.Order) error) error {
		return dst.EachOrder(ctx, fn)
	}, mc)
	return db
}

func (tr *moveTraffic) frozen503() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.frozen
}

// checkMoveTraffic checks, against the store that holds the family (orders reads it), that
// every acknowledged order is there once, stock + sold = initial, the freeze's answers were
// 503 with Retry-After, and the README flow works: browse, cart, a login with the password
// set before the move, an order, an admin status change, and the Idempotency-Key of an order
// placed before the move answering that order.
func checkMoveTraffic(t *testing.T, tr *moveTraffic, initial map[string]int64, beforeID, beforeKey, beforeEmail string,
	orders func(func(order.Order) error) error, c flowClient) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.unexpected) > 0 {
		t.Errorf("unexpected answers during the move: %v", tr.unexpected)
	}
	if tr.frozen == 0 || len(tr.badFrozen) > 0 {
		t.Errorf("%d orders answered 503 in the freeze (want some), %d without Retry-After or problem+json: %v", tr.frozen, len(tr.badFrozen), tr.badFrozen)
	}
	if tr.logins == 0 {
		t.Error("no login succeeded during the move")
	}
	byKey := map[string][]string{}
	sold := map[string]int64{}
	if err := orders(func(o order.Order) error {
		if !tr.users[o.UserID] {
			return nil
		}
		byKey[o.IdempotencyKey] = append(byKey[o.IdempotencyKey], o.ID)
		for _, it := range o.Items {
			if o.Zone == tr.zone && !order.Restocks(o.Status) {
				sold[it.ProductID] += it.Quantity
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for key, id := range tr.acked {
		if got := byKey[key]; len(got) != 1 || got[0] != id {
			t.Errorf("acknowledged order %s (key %s): the store holds %v", id, key, got)
		}
	}
	t.Logf("%d orders acknowledged, %d answered 503 in the freeze and placed on retry, %d logins", len(tr.acked), tr.frozen, tr.logins)
	for id, init := range initial {
		var prod struct{ Stock map[string]int64 }
		c.do("GET", "/v1/products/"+id, "", "", 200, &prod)
		if prod.Stock[tr.zone]+sold[id] != init {
			t.Errorf("product %s: stock %d + sold %d != initial %d", id, prod.Stock[tr.zone], sold[id], init)
		}
	}

	// The README flow.
	var page struct{ Items []struct{ ID string } }
	c.do("GET", "/v1/products?category=books&limit=5", "", "", 200, &page)
	var s, l struct{ Token string }
	c.do("POST", "/v1/sessions", "", "", 201, &s)
	c.do("PUT", "/v1/cart/items/"+page.Items[0].ID, s.Token, `{"quantity":1}`, 200, nil)
	c.do("POST", "/v1/login", s.Token, `{"email":"`+beforeEmail+`","password":"password before the move"}`, 200, &l)
	c.do("POST", "/v1/login", s.Token, `{"email":"`+beforeEmail+`","password":"not the password"}`, 401, nil)
	c.idem = "after-the-move"
	var ord struct{ ID string }
	c.do("POST", "/v1/orders", l.Token, `{"zone":"`+tr.zone+`"}`, 201, &ord)
	c.idem = beforeKey
	var replay struct{ ID string }
	h := c.do("POST", "/v1/orders", l.Token, `{"zone":"`+tr.zone+`"}`, 200, &replay)
	if replay.ID != beforeID || h.Get("Idempotency-Replayed") != "true" {
		t.Errorf("the key %s replayed: order %s (replayed %q), want %s placed before the move", beforeKey, replay.ID, h.Get("Idempotency-Replayed"), beforeID)
	}
	c.idem = ""
	c.do("POST", "/v1/orders/"+ord.ID+"/status", "", `{"status":"paid"}`, 200, nil)
	c.do("POST", "/v1/products", "", `{"id":"after-move-mug","name":"Mug","category":"kitchen","price":"12.50","stock":{"`+tr.zone+`":3}}`, 201, nil)
	eventually.True(t, time.Minute, "the new order in the buyer's history", func() bool {
		status, b, _, err := c.send("GET", "/v1/orders?limit=5", l.Token, "", "")
		return err == nil && status == 200 && strings.Contains(string(b), ord.ID)
	})
}
