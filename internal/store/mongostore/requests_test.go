package mongostore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/store/mongostore"
)

// commandLog records the wire commands each labelled request sends, through the driver's
// command monitor: a command belongs to the request whose context sent it (the HTTP request's,
// which every repository call and the checkout's follow-ups inherit).
type commandLog struct {
	mu       sync.Mutex
	byLabel  map[string][]string   // "find carts", "commitTransaction admin", ...
	commands map[string][]bson.Raw // the commands themselves, for explain
}

type labelKey struct{}

func newCommandLog() *commandLog {
	return &commandLog{byLabel: map[string][]string{}, commands: map[string][]bson.Raw{}}
}

func (l *commandLog) monitor() *event.CommandMonitor {
	return &event.CommandMonitor{Started: func(ctx context.Context, e *event.CommandStartedEvent) {
		label, ok := ctx.Value(labelKey{}).(string)
		if !ok {
			return
		}
		target := e.DatabaseName
		if v, err := e.Command.LookupErr(e.CommandName); err == nil {
			if coll, ok := v.StringValueOK(); ok {
				target = coll
			}
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.byLabel[label] = append(l.byLabel[label], e.CommandName+" "+target)
		l.commands[label] = append(l.commands[label], slices.Clone(e.Command))
	}}
}

// take returns and forgets what label's requests sent.
func (l *commandLog) take(label string) ([]string, []bson.Raw) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cmds, raw := l.byLabel[label], l.commands[label]
	delete(l.byLabel, label)
	delete(l.commands, label)
	return cmds, raw
}

// labelled tags each request's context with the X-Test-Label header's value.
func labelled(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if label := r.Header.Get("X-Test-Label"); label != "" {
			r = r.WithContext(context.WithValue(r.Context(), labelKey{}, label))
		}
		h.ServeHTTP(w, r)
	})
}

// TestCommandsPerRequest drives each request type of the shop through the HTTP API with every
// family on MongoDB and counts the wire commands each sends on its critical path (the checkout
// includes its follow-ups' drain). A count above its budget fails: a round trip crept back in.
// Every query a request sends is explained on the same data: none may scan a collection.
// The budgets are a replica set's (TestMain's): behind a mongos an order or product read by id
// resolves its claim first. -v prints each request's commands (docs/evidence/mongodb.md's table).
// testShop is the shop with every family on MongoDB, a fresh database, three products, and
// its HTTP API.
type testShop struct {
	*shop.Shop
	log *commandLog
	srv *httptest.Server
	db  string
}

func openTestShop(tb testing.TB, ctx context.Context) *testShop {
	tb.Helper()
	uri := mongostore.URIForTest(tb)
	cfg := placement.All(placement.Mongo)
	db := fmt.Sprintf("shardmart_cmds_%d", time.Now().UnixNano())
	tb.Cleanup(func() { dropDatabase(tb, uri, db) })
	log := newCommandLog()
	sh, err := shop.Open(ctx, shop.Config{Placement: cfg, Backends: placement.Options{MongoURI: uri, MongoDatabase: db,
		MongoCommandMonitor: log.monitor()}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = sh.Close() })
	// As serve runs it: the card cache follows the outbox, so catalog reads may be answered
	// from it.
	follow, stop := context.WithCancel(ctx)
	tb.Cleanup(stop)
	go sh.FollowChanges(follow)
	now := time.Now().UTC()
	var products []catalog.Product
	for i := range 3 {
		products = append(products, catalog.Product{ID: fmt.Sprintf("books-%05d", i), Name: fmt.Sprintf("Book %d", i),
			Category: "books", Price: money.MustParse("12.50"), Stock: map[string]int64{"eu-west": 1 << 40}, CreatedAt: now, UpdatedAt: now})
	}
	if err := sh.Stores.Products.CreateProducts(ctx, products); err != nil {
		tb.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); sh.CacheFollowing() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("the card cache does not follow the outbox: %v", sh.CacheFollowing())
		}
	}
	srv := httptest.NewServer(labelled(httpapi.New(httpapi.Deps{Services: sh.API(), AdminToken: "x", Logger: slog.New(slog.DiscardHandler)})))
	tb.Cleanup(srv.Close)
	return &testShop{Shop: sh, log: log, srv: srv, db: db}
}

// do sends one request (labelled when label is set) and decodes its JSON answer; any status
// from 300 up fails tb.
func (ts *testShop) do(tb testing.TB, ctx context.Context, label, method, path, token string, body any, headers ...string) map[string]any {
	tb.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, ts.srv.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if label != "" {
		req.Header.Set("X-Test-Label", label)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode >= 300 {
		tb.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, out)
	}
	return out
}

func TestCommandsPerRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts := openTestShop(t, ctx)
	sh, log, uri := ts.Shop, ts.log, mongostore.URIForTest(t)
	do := func(label, method, path, token string, body any, headers ...string) map[string]any {
		t.Helper()
		return ts.do(t, ctx, label, method, path, token, body, headers...)
	}
	guest := do("", "POST", "/v1/sessions", "", nil)["token"].(string)
	newcomer := do("", "POST", "/v1/sessions", "", nil)["token"].(string)
	do("", "POST", "/v1/users", guest, map[string]string{"email": "ann@example.com", "password": "correct horse"})
	do("", "PUT", "/v1/cart/items/books-00000", guest, map[string]int{"quantity": 1})
	// The catalog's outbox events are applied before the checkouts, as a running shop's projector
	// would have: none of them is left for a later test step.
	if _, err := sh.Projector.Drain(ctx); err != nil {
		t.Fatal(err)
	}

	// Each request type as a shopper sends it; budgets are the commands on its critical path.
	type step struct {
		label  string
		budget int
		send   func(label string)
	}
	var user, orderID string
	steps := []step{
		{"cart edit (guest, first line: new cart)", 4, func(l string) {
			do(l, "PUT", "/v1/cart/items/books-00001", newcomer, map[string]int{"quantity": 2})
		}},
		{"cart edit (guest, existing cart)", 5, func(l string) {
			do(l, "PUT", "/v1/cart/items/books-00001", guest, map[string]int{"quantity": 2})
		}},
		{"cart view", 4, func(l string) { do(l, "GET", "/v1/cart", guest, nil) }},
		{"login (guest cart merged)", 10, func(l string) {
			user = do(l, "POST", "/v1/login", guest, map[string]string{"email": "ann@example.com", "password": "correct horse"})["token"].(string)
		}},
		{"cart edit (user)", 6, func(l string) {
			do(l, "PUT", "/v1/cart/items/books-00002", user, map[string]int{"quantity": 1})
		}},
		{"checkout", 14, func(l string) {
			orderID = do(l, "POST", "/v1/orders", user, map[string]string{"zone": "eu-west"}, "Idempotency-Key", "k1")["id"].(string)
		}},
		{"checkout replayed (same key)", 3, func(l string) {
			do(l, "POST", "/v1/orders", user, map[string]string{"zone": "eu-west"}, "Idempotency-Key", "k1")
		}},
		{"cart edit (user, new cart after checkout)", 7, func(l string) {
			do(l, "PUT", "/v1/cart/items/books-00000", user, map[string]int{"quantity": 1})
		}},
		{"checkout (the cart started after the first)", 12, func(l string) {
			do(l, "POST", "/v1/orders", user, map[string]string{"zone": "eu-west"}, "Idempotency-Key", "k2")
		}},
		{"order view", 2, func(l string) { do(l, "GET", "/v1/orders/"+orderID, user, nil) }},
		{"product read", 1, func(l string) { do(l, "GET", "/v1/products/books-00001", "", nil) }},
		{"browse", 1, func(l string) {
			do(l, "GET", "/v1/products?category=books&min_price=10.00&max_price=50.00&limit=3", "", nil)
		}},
		{"order history", 2, func(l string) { do(l, "GET", "/v1/orders", user, nil) }},
	}
	explained := 0
	for _, s := range steps {
		s.send(s.label)
		cmds, raw := log.take(s.label)
		t.Logf("%-42s %2d: %s", s.label, len(cmds), strings.Join(cmds, ", "))
		explained += len(raw)
		if len(cmds) > s.budget {
			t.Errorf("%s: %d commands, budget %d: %s", s.label, len(cmds), s.budget, strings.Join(cmds, ", "))
		}
		explainAll(ctx, t, uri, ts.db, s.label, raw)
	}
	if explained == 0 {
		t.Error("no query was explained: the COLLSCAN check checked nothing")
	}
	t.Logf("%d commands explained, none scans a collection", explained)
}

// explainAll explains every query among cmds on the database they ran on: no winning plan may
// scan a whole collection (COLLSCAN).
func explainAll(ctx context.Context, t *testing.T, uri, db, label string, cmds []bson.Raw) {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(ctx)
	for _, raw := range cmds {
		name := raw.Index(0).Key()
		switch name {
		case "find", "aggregate", "findAndModify", "update", "delete", "count":
		default:
			continue
		}
		var cmd bson.D
		for _, el := range must(raw.Elements()) {
			switch el.Key() {
			case "lsid", "txnNumber", "startTransaction", "autocommit", "$db", "$clusterTime", "readConcern",
				"writeConcern", "$readPreference", "maxTimeMS", "cursor":
				continue
			}
			cmd = append(cmd, bson.E{Key: el.Key(), Value: el.Value()})
		}
		var out bson.Raw
		out, err := c.Database(db).RunCommand(ctx, bson.D{{Key: "explain", Value: cmd}, {Key: "verbosity", Value: "queryPlanner"}}).Raw()
		if err != nil {
			t.Errorf("%s: explain %v: %v", label, cmd, err)
			continue
		}
		if plan := out.Lookup("queryPlanner", "winningPlan").String(); strings.Contains(plan, `"COLLSCAN"`) {
			t.Errorf("%s: %s on %v scans the collection: %s", label, name, cmd, plan)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// BenchmarkRequests times the requests whose MongoDB commands TestCommandsPerRequest counts,
// one after another through the HTTP API (ns/op is one request's latency): a guest's cart edit
// into an existing cart, a checkout of a one-line cart (its cart edit not timed), and a login
// that merges a one-line guest cart (the new guest session and its edit not timed).
func BenchmarkRequests(b *testing.B) {
	ctx := context.Background()
	ts := openTestShop(b, ctx)
	guest := ts.do(b, ctx, "", "POST", "/v1/sessions", "", nil)["token"].(string)
	ts.do(b, ctx, "", "POST", "/v1/users", guest, map[string]string{"email": "bench@example.com", "password": "correct horse"})
	login := func(token string) string {
		return ts.do(b, ctx, "", "POST", "/v1/login", token, map[string]string{"email": "bench@example.com", "password": "correct horse"})["token"].(string)
	}
	b.Run("cart_edit", func(b *testing.B) {
		ts.do(b, ctx, "", "PUT", "/v1/cart/items/books-00000", guest, map[string]int{"quantity": 1})
		for i := 0; b.Loop(); i++ {
			ts.do(b, ctx, "", "PUT", "/v1/cart/items/books-00001", guest, map[string]int{"quantity": 1 + i%5})
		}
	})
	b.Run("checkout", func(b *testing.B) {
		user := login(ts.do(b, ctx, "", "POST", "/v1/sessions", "", nil)["token"].(string))
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			ts.do(b, ctx, "", "PUT", "/v1/cart/items/books-00002", user, map[string]int{"quantity": 1})
			b.StartTimer()
			ts.do(b, ctx, "", "POST", "/v1/orders", user, map[string]string{"zone": "eu-west"}, "Idempotency-Key", fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i))
		}
	})
	b.Run("login", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			g := ts.do(b, ctx, "", "POST", "/v1/sessions", "", nil)["token"].(string)
			ts.do(b, ctx, "", "PUT", "/v1/cart/items/books-00000", g, map[string]int{"quantity": 1})
			b.StartTimer()
			login(g)
		}
	})
}
