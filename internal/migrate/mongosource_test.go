package migrate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	mlauncher "github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// The MongoDB source tests share one 1-member replica set on launcher.MigrateTestPort, started
// by the first test that needs it and stopped by TestMain (stopMongo); its mongod dies with
// the test binary whatever kills it.
var (
	mongoOnce sync.Once
	mongoURI  string
	mongoErr  error
	mongoStop func()
)

func stopMongo() {
	if mongoStop != nil {
		mongoStop()
	}
}

// mongoStore opens a fresh database on the shared set through the shop's repositories.
func mongoStore(t *testing.T) (*mongostore.Store, string) {
	t.Helper()
	mongoOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		set, stop, err := mlauncher.StartShared(ctx, mlauncher.Options{Members: 1, BasePort: mlauncher.MigrateTestPort})
		if err != nil {
			mongoErr = fmt.Errorf("start a one-member replica set on port %d: %w", mlauncher.MigrateTestPort, err)
			return
		}
		mongoURI, mongoStop = set.URI(), stop
	})
	if mongoErr != nil {
		t.Fatal(mongoErr)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	db := "mig_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	st, err := mongostore.Open(ctx, mongostore.Options{URI: mongoURI, Database: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = st.Database().Drop(context.Background())
		st.Close()
	})
	return st, db
}

// mongoSeed is what seedMongo wrote, for the assertions.
type mongoSeed struct {
	liveSessions, carts int
	users, actors       []string
	day                 time.Time
	products            []string
}

// seedMongo writes through the repositories: sessions (one in five expired), user and guest
// carts with lines, an ordered cart retired out of its slot, history entries, events and
// products with stock in two zones, one inactive.
func seedMongo(t *testing.T, st *mongostore.Store, n int) mongoSeed {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	var sd mongoSeed
	for i := range n {
		id := sha256.Sum256([]byte(fmt.Sprint("ms", i)))
		exp := now.Add(time.Duration(1+i%120) * time.Hour)
		if i%5 == 0 {
			exp = now.Add(-time.Hour)
		} else {
			sd.liveSessions++
		}
		s := session.Session{ID: hex.EncodeToString(id[:]), CreatedAt: now.Add(-2 * time.Hour), LastActive: now.Add(-time.Minute),
			ExpiresAt: exp, IP: fmt.Sprintf("10.1.%d.%d:4000", i/250, i%250), UserAgent: "test-agent", Status: session.StatusActive,
			Data: map[string]string{"k": fmt.Sprint(i)}}
		if i%3 == 0 {
			s.UserID = fmt.Sprint("u", i)
		}
		if err := st.Sessions().CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	carts := st.Carts()
	put := func(o cart.Owner, pid string, qty int64, exp time.Time) cart.Cart {
		c, err := carts.PutItem(ctx, o, cart.Item{ProductID: pid, Category: "books", Quantity: qty, AddedAt: now.Add(-30 * time.Minute)}, exp, now.Add(-20*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for i := range 40 {
		o, exp := cart.User(fmt.Sprint("cu", i)), time.Time{}
		if i%2 == 1 {
			o, exp = cart.Guest(fmt.Sprint("cs", i)), now.Add(48*time.Hour)
		}
		for j := range 1 + i%3 {
			put(o, fmt.Sprint("p", j), int64(j+1), exp)
		}
		sd.carts++
	}
	// cu0's cart ordered, then a new cart for cu0: the first moves to _id = cart_id.
	old := put(cart.User("cu0"), "p9", 1, time.Time{})
	if err := carts.MarkOrdered(ctx, cart.User("cu0"), old.ID, "o-cu0", now.Add(-10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if c := put(cart.User("cu0"), "p7", 2, time.Time{}); c.ID == old.ID {
		t.Fatal("the ordered cart was not replaced")
	}
	sd.carts++
	for u := range 3 {
		user := fmt.Sprint("hu", u)
		sd.users = append(sd.users, user)
		for k := range 4 {
			h := history.Entry{UserID: user, OrderID: fmt.Sprintf("o-%d-%d", u, k), PlacedAt: now.Add(-time.Duration(k) * time.Hour),
				UpdatedAt: now.Add(-time.Duration(k) * time.Minute), Status: order.Paid, Zone: "eu", Total: money.Amount(1999 * (k + 1)),
				Items: []order.Item{{ProductID: "p1", Category: "books", Name: "Book", Quantity: int64(k + 1), UnitPrice: 1999}}}
			if err := st.History().UpsertEntry(ctx, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	sd.day = now.Add(-time.Hour)
	for a := range 3 {
		actor := fmt.Sprint("u:ea", a)
		sd.actors = append(sd.actors, actor)
		for k := range 5 {
			ev := event.Event{ID: fmt.Sprintf("e-%d-%d", a, k), Actor: actor, Type: event.View, At: sd.day.Add(time.Duration(k) * time.Second),
				ProductID: "p1", Details: map[string]string{"ref": fmt.Sprint(k)}}
			if err := st.Events().AppendEvent(ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 6 {
		p := catalog.Product{ID: fmt.Sprint("prod", i), Name: fmt.Sprint("Product ", i), Description: "d", Category: "books",
			Price: money.Amount(500 + i), Inactive: i == 5, Attributes: map[string]string{"color": "red"},
			Stock: map[string]int64{"eu": int64(i), "us": int64(10 + i)}, CreatedAt: now.Add(-time.Hour), UpdatedAt: now}
		if err := st.Products().CreateProduct(ctx, p); err != nil {
			t.Fatal(err)
		}
		sd.products = append(sd.products, p.ID)
	}
	return sd
}

func openMongoSource(t *testing.T, db string) *MongoSource {
	t.Helper()
	src, err := OpenMongoSource(context.Background(), mongoURI, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// MIG-1 from MongoDB: Count, Split and Read agree, every key in exactly one range, in order,
// with and without the migration indexes.
func TestMongoSourceReadCountSplit(t *testing.T) {
	ctx := context.Background()
	st, db := mongoStore(t)
	sd := seedMongo(t, st, 200)
	// retire's first step caught before its second: cu2's cart both in its slot and, abandoned,
	// at _id = cart_id. Read returns it once, from the copy.
	coll := st.Database().Collection(mongostore.CartsCollection)
	var slot bson.D
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "active:u:cu2"}}).Decode(&slot); err != nil {
		t.Fatal(err)
	}
	var midRetire string
	for i, el := range slot {
		switch el.Key {
		case "cart_id":
			midRetire = el.Value.(string)
		case "status":
			slot[i].Value = string(cart.Abandoned)
		}
	}
	slot[0] = bson.E{Key: "_id", Value: midRetire}
	if _, err := coll.InsertOne(ctx, slot); err != nil {
		t.Fatal(err)
	}
	src := openMongoSource(t, db)
	want := map[Family]int{Sessions: 200, Carts: sd.carts, History: 12, Events: 15, Catalog: 6}
	for _, indexed := range []bool{false, true} {
		if indexed {
			if err := src.EnsureIndexes(ctx); err != nil {
				t.Fatal(err)
			}
			// Every family's range read is now an index range scan, sorted by the index.
			for f, mf := range mongoFamilies {
				q := bson.D{{Key: mf.key, Value: bson.D{{Key: "$gte", Value: "1"}, {Key: "$lt", Value: "8"}}}}
				plan, err := st.Database().RunCommand(ctx, bson.D{{Key: "explain", Value: bson.D{{Key: "find", Value: mf.coll},
					{Key: "filter", Value: q}, {Key: "sort", Value: bson.D{{Key: mf.key, Value: 1}}}}}}).Raw()
				if err != nil {
					t.Fatal(err)
				}
				if w := plan.Lookup("queryPlanner", "winningPlan").String(); !strings.Contains(w, "IXSCAN") || strings.Contains(w, `"SORT"`) {
					t.Fatalf("%s: range read plan %s, want an index scan without a sort", f, w)
				}
			}
		}
		for _, f := range Families {
			all, err := src.Read(ctx, f, Range{})
			if err != nil {
				t.Fatal(err)
			}
			n, err := src.Count(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			// Count counts documents: the cart caught mid-retire twice.
			if f == Carts {
				n--
				if r := all[sort.Search(len(all), func(i int) bool { return all[i].Key >= midRetire })]; r.Key != midRetire || r.Cart.Status != cart.Abandoned {
					t.Fatalf("cart mid-retire read as %+v, want its abandoned copy", r.Cart)
				}
			}
			if len(all) != want[f] || n != int64(want[f]) {
				t.Fatalf("%s: read %d rows, count %d, want %d", f, len(all), n, want[f])
			}
			if !sort.SliceIsSorted(all, func(i, j int) bool { return all[i].Key < all[j].Key }) {
				t.Fatalf("%s: rows not in key order", f)
			}
			rs, err := src.Split(ctx, f, 4)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) < 2 && len(all) >= 8 {
				t.Fatalf("%s: split into %d ranges", f, len(rs))
			}
			var got []string
			for _, r := range rs {
				rows, err := src.Read(ctx, f, r)
				if err != nil {
					t.Fatal(err)
				}
				for _, row := range rows {
					if !r.contains(row.Key) {
						t.Fatalf("%s: key %s read in range %+v", f, row.Key, r)
					}
					got = append(got, row.Key)
				}
			}
			if len(got) != len(all) {
				t.Fatalf("%s: ranges %v hold %d rows, want %d", f, rs, len(got), len(all))
			}
			for i := range got {
				if got[i] != all[i].Key {
					t.Fatalf("%s: row %d is %s across ranges, %s in one read", f, i, got[i], all[i].Key)
				}
			}
		}
	}
}

// MIG-1 from MongoDB: sessions and carts copied into Cassandra verify with 0 differences; the
// other families' rows are exactly what the shop's MongoDB repositories return.
func TestMongoSourceBackfillAndRows(t *testing.T) {
	ctx := context.Background()
	st, db := mongoStore(t)
	sd := seedMongo(t, st, 200)
	src := openMongoSource(t, db)
	if err := src.EnsureIndexes(ctx); err != nil {
		t.Fatal(err)
	}
	_, s := keyspace(t)
	dst := NewTarget(s)
	for _, f := range []Family{Sessions, Carts} {
		stats, err := Backfill(ctx, src, dst, f, Options{Split: 16, Workers: 4})
		if err != nil {
			t.Fatal(err)
		}
		if f == Sessions && (stats.Rows != int64(sd.liveSessions) || stats.Skipped != int64(200-sd.liveSessions)) {
			t.Fatalf("sessions copied %d skipped %d, want %d and %d", stats.Rows, stats.Skipped, sd.liveSessions, 200-sd.liveSessions)
		}
		if f == Carts && stats.Rows != int64(sd.carts) {
			t.Fatalf("carts copied %d, want %d", stats.Rows, sd.carts)
		}
		if rep, err := Verify(ctx, src, dst, f, Options{Split: 16}); err != nil {
			t.Fatalf("verify %s: %v (%v)", f, err, rep.Diffs)
		}
	}
	rows := func(f Family) map[string]Row {
		rs, err := src.Read(ctx, f, Range{})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]Row{}
		for _, r := range rs {
			m[r.Key] = r
		}
		return m
	}
	// The ordered cart reads from its retired copy, as Ordered.
	var ordered int
	for _, r := range rows(Carts) {
		if r.Cart.Status == cart.Ordered {
			ordered++
			if r.Cart.OrderID != "o-cu0" || !r.Modified.Equal(r.Cart.UpdatedAt) {
				t.Fatalf("ordered cart %+v modified %v", r.Cart, r.Modified)
			}
		}
	}
	if ordered != 1 {
		t.Fatalf("%d ordered carts, want 1", ordered)
	}
	hist := rows(History)
	for _, u := range sd.users {
		page, err := st.History().ListHistory(ctx, u, paging.Request{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Items {
			r, ok := hist[e.OrderID]
			if !ok || !reflect.DeepEqual(*r.Entry, e) || !r.Modified.Equal(e.UpdatedAt) || !r.Expires.IsZero() {
				t.Fatalf("history %s: row %+v, repository %+v", e.OrderID, r.Entry, e)
			}
			delete(hist, e.OrderID)
		}
	}
	evs := rows(Events)
	for _, a := range sd.actors {
		page, err := st.Events().ListEvents(ctx, event.Query{Actor: a, Day: sd.day, Page: paging.Request{Limit: 100}})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Items {
			r, ok := evs[e.ID]
			if !ok || !reflect.DeepEqual(*r.Event, e) || !r.Modified.Equal(e.At) || !r.Expires.Equal(e.At.Add(event.DefaultRetention)) {
				t.Fatalf("event %s: row %+v (expires %v), repository %+v", e.ID, r.Event, r.Expires, e)
			}
			delete(evs, e.ID)
		}
	}
	prods := rows(Catalog)
	for _, id := range sd.products {
		p, err := st.Products().GetProduct(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := prods[id]
		if !ok || !reflect.DeepEqual(*r.Product, p) || !r.Modified.Equal(p.UpdatedAt) || len(p.Stock) != 2 {
			t.Fatalf("product %s: row %+v, repository %+v", id, r.Product, p)
		}
		delete(prods, id)
	}
	if len(hist)+len(evs)+len(prods) != 0 {
		t.Fatalf("rows no repository returned: history %v, events %v, catalog %v", hist, evs, prods)
	}
}
