package mongostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

// BenchmarkPairs compares each repository operation with the same commands issued raw through
// the driver: same collections, filters, updates, options, read preference (primary), write
// concern (majority), and for orders the same transaction (same options, same statements in the
// same order) through the same convenient API; the reply is taken as bson.Raw, with no decoding
// into structs, no mapping, no validation, no cursor encoding. Keys the repository derives
// (claim ids, event ObjectIds, the outbox partition) are derived the same way, since they are the
// commands' content. The two sides run interleaved in the same goroutines (even operations
// through the repository, odd ones raw; the method of internal/store/cassandrastore/bench_test.go),
// so both see the same server state and the same noise. Per side: throughput W/mean latency
// (Little's law, W = 16 busy callers), p99; overhead = repository mean / raw mean latency.
// Numbers: docs/evidence/benchmarks.md.
//
//	go test ./internal/store/mongostore -run '^$' -bench 'Pairs|VsSQLite' -benchtime 4000x -count 3
func BenchmarkPairs(b *testing.B) {
	s, _ := liveStore(b)
	for _, p := range benchPairs(b, s) {
		b.Run(p.name, func(b *testing.B) { runPair(b, p.repo, p.raw) })
	}
}

const benchParallelism = 8 // x GOMAXPROCS goroutines

type opFunc func(ctx context.Context, i int64) error

type benchPair struct {
	name      string
	repo, raw opFunc
}

// runSeq gives every runPair call its own index range, so operations that insert (sessions,
// events, orders) never reuse a key across -count runs or the testing package's b.N=1 probe.
var runSeq atomic.Int64

// runPair measures repo against raw (storetest.BenchPair); each call has its own key range and
// raw keys are negative, so the two sides never share a new key.
func runPair(b *testing.B, repo, raw opFunc) {
	b.Helper()
	base := runSeq.Add(1) << 36
	storetest.BenchPair(b, benchParallelism, storetest.PairOp(repo), storetest.PairOp(raw), func(side int, i int64) int64 {
		if side == 1 {
			return -(base + i)
		}
		return base + i
	})
}

// benchAbs is i without its sign: the raw side gets -k for the key k (see runPair).
func benchAbs(i int64) int64 {
	if i < 0 {
		return -i
	}
	return i
}

// rawColls are collection handles made once, as an application using the driver would hold
// them: primary reads, majority writes (what Store.coll gives the repositories).
type rawColls struct {
	client                                                          *mongo.Client
	carts, sessions, events, products, claims, orders, counters, ob *mongo.Collection
}

func newRawColls(s *Store) rawColls {
	db := s.client.Database(s.db.Name(), options.Database().SetWriteConcern(writeconcern.Majority()))
	c := func(name string) *mongo.Collection {
		return db.Collection(name, options.Collection().SetReadPreference(readpref.Primary()))
	}
	return rawColls{client: s.client, carts: c(collCarts), sessions: c(collSessions), events: c(collEvents),
		products: c(collProducts), claims: c(collClaims), orders: c(collOrders), counters: c(collCounters), ob: c(collOutbox)}
}

// rawAfter is the raw side's findAndModify option, the same as the repositories'.
var rawAfter = options.FindOneAndUpdate().SetReturnDocument(options.After)

// benchPairs builds the data and the pairs; tb may be a *testing.T (command checks).
func benchPairs(tb testing.TB, s *Store) []benchPair {
	tb.Helper()
	var out []benchPair
	for _, f := range []func(testing.TB, *Store, rawColls) []benchPair{cartPairs, sessionPairs, eventPairs, productPairs, orderPairs} {
		out = append(out, f(tb, s, newRawColls(s))...)
	}
	return out
}

// parallelSetup runs fn(0..n-1) on 16 goroutines (setup writes are w: majority, ~ms each).
func parallelSetup(tb testing.TB, n int, fn func(i int) error) {
	tb.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
}

// liveCart is liveCartFilter written out for a user cart.
func rawLiveCart(slot, user string, now time.Time) bson.D {
	return d(e("_id", slot), e("user_id", user), e("status", "active"),
		e("$or", bson.A{d(e("expires_at", d(e("$exists", false)))), d(e("expires_at", d(e("$gt", now))))}))
}

func cartPairs(tb testing.TB, s *Store, raw rawColls) []benchPair {
	r := s.Carts()
	ctx := context.Background()
	now := time.Now().UTC()
	// 256 user carts of 5 lines; puts set the quantity of one of the 5 (the first
	// findAndModify matches), reads return the whole cart.
	const owners, lines = 256, 5
	users := make([]cart.Owner, owners)
	slots := make([]string, owners)
	for i := range users {
		users[i] = cart.User(fmt.Sprintf("bench-%d-%d", now.UnixNano(), i))
		slots[i] = "active:u:" + users[i].UserID
	}
	parallelSetup(tb, owners, func(i int) error {
		for j := range lines {
			if _, err := r.PutItem(ctx, users[i], cart.Item{ProductID: fmt.Sprintf("p%d", j), Category: "c", Quantity: 1, AddedAt: now}, time.Time{}, now); err != nil {
				return err
			}
		}
		return nil
	})
	return []benchPair{
		{"carts-put", func(ctx context.Context, i int64) error {
			_, err := r.PutItem(ctx, users[i%owners], cart.Item{ProductID: fmt.Sprintf("p%d", i%lines), Category: "c", Quantity: i%9 + 1, AddedAt: now}, time.Time{}, now)
			return err
		}, func(ctx context.Context, i int64) error {
			i = benchAbs(i)
			u, pid := users[i%owners].UserID, fmt.Sprintf("p%d", i%lines)
			filter := append(rawLiveCart(slots[i%owners], u, now), e("items.product_id", pid))
			_, err := raw.carts.FindOneAndUpdate(ctx, filter, d(e("$set", d(e("items.$.quantity", i%9+1), e("updated_at", now)))), rawAfter).Raw()
			if errors.Is(err, mongo.ErrNoDocuments) { // the line is missing: push it (never here)
				filter = append(rawLiveCart(slots[i%owners], u, now), e("items.product_id", d(e("$ne", pid))),
					e(fmt.Sprintf("items.%d", cart.MaxItems-1), d(e("$exists", false))))
				line := d(e("product_id", pid), e("category", "c"), e("quantity", i%9+1), e("added_at", now))
				_, err = raw.carts.FindOneAndUpdate(ctx, filter, d(e("$push", d(e("items", line))), e("$set", d(e("updated_at", now)))), rawAfter).Raw()
			}
			return err
		}},
		{"carts-get", func(ctx context.Context, i int64) error {
			_, err := r.ActiveCart(ctx, users[i%owners], now)
			return err
		}, func(ctx context.Context, i int64) error {
			i = benchAbs(i)
			_, err := raw.carts.FindOne(ctx, rawLiveCart(slots[i%owners], users[i%owners].UserID, now)).Raw()
			return err
		}},
	}
}

func sessionPairs(tb testing.TB, s *Store, raw rawColls) []benchPair {
	r := s.Sessions()
	now := time.Now().UTC()
	prefix := fmt.Sprintf("bench-%d-", now.UnixNano())
	mk := func(i int64) session.Session {
		return session.Session{ID: fmt.Sprintf("%s%d", prefix, i), CreatedAt: now, LastActive: now, ExpiresAt: now.Add(time.Hour),
			IP: "203.0.113.7", UserAgent: "bench/1.0", Status: session.StatusActive, Data: map[string]string{"locale": "ru"}}
	}
	const n = 1000 // sessions to read, written once up front
	parallelSetup(tb, n, func(i int) error { return r.CreateSession(context.Background(), mk(int64(i))) })
	return []benchPair{
		{"sessions-create", func(ctx context.Context, i int64) error {
			return r.CreateSession(ctx, mk(i))
		}, func(ctx context.Context, i int64) error {
			_, err := raw.sessions.InsertOne(ctx, d(e("_id", fmt.Sprintf("%s%d", prefix, i)), e("user_id", nil),
				e("created_at", now), e("last_active", now), e("expires_at", now.Add(time.Hour)), e("ip_address", "203.0.113.7"),
				e("user_agent", "bench/1.0"), e("status", "active"), e("data", bson.A{d(e("key", "locale"), e("value", "ru"))})))
			return err
		}},
		{"sessions-get", func(ctx context.Context, i int64) error {
			_, err := r.GetSession(ctx, fmt.Sprintf("%s%d", prefix, i%n), now)
			return err
		}, func(ctx context.Context, i int64) error {
			_, err := raw.sessions.FindOne(ctx, d(e("_id", fmt.Sprintf("%s%d", prefix, benchAbs(i)%n)), e("expires_at", d(e("$gt", now))))).Raw()
			return err
		}},
	}
}

func eventPairs(tb testing.TB, s *Store, raw rawColls) []benchPair {
	r := s.Events()
	day := event.Day(time.Now())
	lo, hi := dayBounds(day)
	prefix := fmt.Sprintf("u:bench-%d-", time.Now().UnixNano())
	const actors = 64
	actor := func(i int64) string { return fmt.Sprintf("%s%d", prefix, benchAbs(i)%actors) }
	at := func(i int64) time.Time { return day.Add(time.Duration(benchAbs(i)%(24*3600*1000)) * time.Millisecond) }
	// 30 events per actor up front, so every list returns a full page and a cursor.
	docs := make([]any, 0, actors*30)
	for a := range int64(actors) {
		for j := range int64(30) {
			id, err := eventObjectID(actor(a), fmt.Sprintf("s%d", j), at(j*1000))
			if err != nil {
				tb.Fatal(err)
			}
			docs = append(docs, eventDoc{ID: id, EventID: fmt.Sprintf("s%d", j), Actor: actor(a), Type: string(event.View),
				At: at(j * 1000), ProductID: "p1", Details: []kvDoc{{Key: "src", Value: "bench"}}})
		}
	}
	if _, err := raw.events.InsertMany(context.Background(), docs); err != nil {
		tb.Fatal(err)
	}
	return []benchPair{
		{"events-append", func(ctx context.Context, i int64) error {
			return r.AppendEvent(ctx, event.Event{ID: fmt.Sprintf("e%d", i), Actor: actor(i), Type: event.View,
				At: at(i), ProductID: "p1", Details: map[string]string{"src": "bench"}})
		}, func(ctx context.Context, i int64) error {
			evID := fmt.Sprintf("e%d", i)
			id, err := eventObjectID(actor(i), evID, at(i))
			if err != nil {
				return err
			}
			_, err = raw.events.InsertOne(ctx, d(e("_id", id), e("event_id", evID), e("user_id", actor(i)), e("type", "view"),
				e("at", at(i)), e("product_id", "p1"), e("details", bson.A{d(e("key", "src"), e("value", "bench"))})))
			if mongo.IsDuplicateKeyError(err) { // as AppendEvent: a re-append is ignored
				err = nil
			}
			return err
		}},
		{"events-list20", func(ctx context.Context, i int64) error {
			page, err := r.ListEvents(ctx, event.Query{Actor: actor(i), Day: day, Page: paging.Request{Limit: 20}})
			if err == nil && (len(page.Items) != 20 || page.Next == "") {
				err = fmt.Errorf("events page of %d, next %q", len(page.Items), page.Next)
			}
			return err
		}, func(ctx context.Context, i int64) error {
			cur, err := raw.events.Find(ctx, d(e("user_id", actor(i)), e("_id", d(e("$gte", lo), e("$lt", hi)))),
				options.Find().SetSort(d(e("_id", -1))).SetLimit(21))
			if err != nil {
				return err
			}
			var docs []bson.Raw
			if err := cur.All(ctx, &docs); err != nil {
				return err
			}
			if len(docs) != 21 {
				return fmt.Errorf("raw events page of %d", len(docs))
			}
			return nil
		}},
	}
}

const (
	benchProducts   = 5000
	benchCategories = 20
)

// benchCatalog inserts products the way CreateProduct stores them (claim + product document;
// the outbox rows are left out: no pair reads them) in two InsertMany calls.
func benchCatalog(tb testing.TB, s *Store, prefix string, n, cats int, stock int64) []catalog.Product {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now().UTC()
	ps := make([]catalog.Product, n)
	claims, prods := make([]any, n), make([]any, n)
	for i := range ps {
		ps[i] = catalog.Product{ID: fmt.Sprintf("%s%05d", prefix, i), Name: "Bench product", Category: fmt.Sprintf("%scat%02d", prefix, i%cats),
			Price: money.Amount(100 + rng.IntN(100000)), Attributes: map[string]string{"color": "red", "brand": "acme"},
			Stock: map[string]int64{"eu": stock, "us": 100}, CreatedAt: now, UpdatedAt: now}
		claims[i] = claimDoc{ID: productClaimID(ps[i].ID), Category: ps[i].Category, At: now}
		prods[i] = toProductDoc(ps[i])
	}
	ctx := context.Background()
	if _, err := s.coll(collClaims).InsertMany(ctx, claims); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.coll(collProducts).InsertMany(ctx, prods); err != nil {
		tb.Fatal(err)
	}
	return ps
}

func productPairs(tb testing.TB, s *Store, raw rawColls) []benchPair {
	r := s.Products()
	prefix := fmt.Sprintf("bp%d-", time.Now().UnixNano())
	ps := benchCatalog(tb, s, prefix, benchProducts, benchCategories, catalog.MaxStock)
	minP, maxP := money.MustParse("100.00"), money.MustParse("600.00")
	category := func(i int64) string { return fmt.Sprintf("%scat%02d", prefix, benchAbs(i)%benchCategories) }
	return []benchPair{
		{"products-get", func(ctx context.Context, i int64) error {
			_, err := r.GetProduct(ctx, ps[(i*31)%benchProducts].ID)
			return err
		}, func(ctx context.Context, i int64) error {
			id := ps[(benchAbs(i)*31)%benchProducts].ID
			claim, err := raw.claims.FindOne(ctx, d(e("_id", "p:"+id))).Raw()
			if err != nil {
				return err
			}
			_, err = raw.products.FindOne(ctx, d(e("category", claim.Lookup("category").StringValue()), e("_id", id))).Raw()
			return err
		}},
		{"products-search", func(ctx context.Context, i int64) error {
			page, err := r.SearchProducts(ctx, catalog.Search{Category: category(i), MinPrice: minP, MaxPrice: maxP, Page: paging.Request{Limit: 20}})
			if err == nil && (len(page.Items) != 20 || page.Next == "") {
				err = fmt.Errorf("search page of %d, next %q", len(page.Items), page.Next)
			}
			return err
		}, func(ctx context.Context, i int64) error {
			cur, err := raw.products.Find(ctx, d(e("category", category(i)), e("price", d(e("$gte", int64(minP)), e("$lte", int64(maxP))))),
				options.Find().SetSort(d(e("price", 1), e("_id", 1))).SetLimit(21))
			if err != nil {
				return err
			}
			var docs []bson.Raw
			if err := cur.All(ctx, &docs); err != nil {
				return err
			}
			if len(docs) != 21 {
				return fmt.Errorf("raw search page of %d", len(docs))
			}
			return nil
		}},
	}
}

// rawTxnOptions are txnOptions written out.
var rawTxnOptions = options.Transaction().SetReadConcern(readconcern.Snapshot()).
	SetWriteConcern(writeconcern.Majority()).SetReadPreference(readpref.Primary())

func orderPairs(tb testing.TB, s *Store, raw rawColls) []benchPair {
	r := s.Orders()
	const products = 500 // as BenchmarkPlaceOrders: 3 of 500, so stock documents rarely conflict
	prefix := fmt.Sprintf("op%d-", time.Now().UnixNano())
	ps := benchCatalog(tb, s, prefix, products, 10, catalog.MaxStock)
	now := time.Now().UTC()
	pick := func() [3]int { // 3 distinct products
		var k [3]int
		k[0] = rand.IntN(products)
		for k[1] = rand.IntN(products); k[1] == k[0]; k[1] = rand.IntN(products) {
		}
		for k[2] = rand.IntN(products); k[2] == k[0] || k[2] == k[1]; k[2] = rand.IntN(products) {
		}
		return k
	}
	placement := func(i int64) order.Placement {
		id := fmt.Sprintf("%s%d", prefix, i)
		lines := make([]order.Line, 0, 3)
		for _, k := range pick() {
			lines = append(lines, order.Line{ProductID: ps[k].ID, Category: ps[k].Category, Quantity: 1})
		}
		return order.Placement{OrderID: "o" + id, UserID: "u" + id, CartID: "c" + id, CartOwner: "user:u" + id,
			Zone: "eu", IdempotencyKey: "k" + id, Lines: lines, At: now}
	}
	// The raw side's outbox payload has the length of the repository's (the order as JSON).
	sample := placement(1 << 40)
	o := order.Order{ID: sample.OrderID, UserID: sample.UserID, CartID: sample.CartID, Zone: "eu", Status: order.Created,
		IdempotencyKey: sample.IdempotencyKey, CreatedAt: now, UpdatedAt: now}
	for _, l := range sample.Lines {
		o.Items = append(o.Items, order.Item{ProductID: l.ProductID, Category: l.Category, Name: "Bench product", Quantity: 1, UnitPrice: money.MustParse("999.99")})
	}
	o.Total = money.MustParse("2999.97")
	payload, err := json.Marshal(o)
	if err != nil {
		tb.Fatal(err)
	}
	return []benchPair{
		{"orders-place3", func(ctx context.Context, i int64) error {
			_, created, err := r.Place(ctx, placement(i))
			if err == nil && !created {
				err = errors.New("order not created")
			}
			return err
		}, func(ctx context.Context, i int64) error {
			p := placement(i)
			sess, err := raw.client.StartSession()
			if err != nil {
				return err
			}
			defer sess.EndSession(context.WithoutCancel(ctx))
			_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
				keyID := keyClaimID(p.UserID, p.IdempotencyKey)
				if err := raw.claims.FindOne(ctx, d(e("_id", keyID))).Err(); !errors.Is(err, mongo.ErrNoDocuments) {
					return nil, fmt.Errorf("idempotency claim: %v", err)
				}
				if _, err := raw.claims.InsertMany(ctx, []any{
					d(e("_id", keyID), e("user_id", p.UserID), e("order_id", p.OrderID), e("at", p.At)),
					d(e("_id", "c:"+p.CartID), e("user_id", p.UserID), e("order_id", p.OrderID), e("at", p.At)),
					d(e("_id", "o:"+p.OrderID), e("user_id", p.UserID), e("order_id", p.OrderID), e("at", p.At)),
				}); err != nil {
					return nil, err
				}
				items := make(bson.A, 0, len(p.Lines))
				var total int64
				for _, l := range p.Lines {
					doc, err := raw.products.FindOneAndUpdate(ctx,
						d(e("category", l.Category), e("_id", l.ProductID), e("stock.eu", d(e("$gte", l.Quantity)))),
						d(e("$inc", d(e("stock.eu", -l.Quantity)))), rawAfter).Raw()
					if err != nil {
						return nil, err
					}
					price := doc.Lookup("price").Int64()
					total += price * l.Quantity
					items = append(items, d(e("product_id", l.ProductID), e("category", l.Category),
						e("name", doc.Lookup("name").StringValue()), e("quantity", l.Quantity), e("price", price)))
				}
				if _, err := raw.orders.InsertOne(ctx, d(e("_id", p.OrderID), e("user_id", p.UserID), e("cart_id", p.CartID),
					e("geo_zone", p.Zone), e("items", items), e("total_price", total), e("status", "created"),
					e("idem_key", p.IdempotencyKey), e("order_date", p.At), e("updated_at", p.At))); err != nil {
					return nil, err
				}
				h := fnv.New32a()
				_, _ = h.Write([]byte(p.OrderID))
				part := int32(h.Sum32() % uint32(s.partitions))
				c, err := raw.counters.FindOneAndUpdate(ctx, d(e("_id", fmt.Sprintf("outbox/%d", part))),
					d(e("$inc", d(e("seq", int64(1))))), rawAfter).Raw()
				if err != nil {
					return nil, err
				}
				_, err = raw.ob.InsertOne(ctx, d(e("p", part), e("seq", c.Lookup("seq").AsInt64()), e("topic", outbox.TopicOrderPlaced),
					e("key", p.OrderID), e("payload", payload), e("at", p.At)))
				return nil, err
			}, rawTxnOptions)
			return err
		}},
	}
}
