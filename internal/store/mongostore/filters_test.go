package mongostore

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/readrouting"
	"github.com/shardmart/shardmart/internal/sharding"
	"github.com/shardmart/shardmart/internal/validation"
)

var now = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// equalityOn returns the value a filter pins field to by plain equality (what mongos needs to
// target a shard), and whether it does.
func equalityOn(f bson.D, field string) (any, bool) {
	for _, el := range f {
		if el.Key != field {
			continue
		}
		if doc, isDoc := el.Value.(bson.D); isDoc && len(doc) > 0 && strings.HasPrefix(doc[0].Key, "$") {
			return nil, false // an operator, not an equality
		}
		return el.Value, true
	}
	return nil, false
}

// TestTargetedFiltersCarryTheShardKey: every filter of an operation that has the shard key in
// hand pins every shard-key field by equality, so mongos sends it to one shard (SHD-1 keys).
func TestTargetedFiltersCarryTheShardKey(t *testing.T) {
	ref := catalog.Ref{ID: "p1", Category: "tools"}
	user, guest := cart.User("alice"), cart.Guest("sess1")
	cases := []struct {
		name   string
		coll   string
		filter bson.D
	}{
		{"take stock (ORD-1, PRD-1)", collProducts, takeStockFilter(ref, "eu", 2)},
		{"add stock under the cap (PRD-1)", collProducts, addStockFilter(ref, "eu", 2)},
		{"return stock / read by key", collProducts, productKey(ref)},
		{"order by key", collOrders, orderKey("alice", "o1")},
		{"order status compare-and-set", collOrders, orderStatusFilter("alice", "o1", "created")},
		{"active user cart (CRT-2)", collCarts, liveCartFilter(user, now)},
		{"active guest cart (CRT-2)", collCarts, liveCartFilter(guest, now)},
		{"put line, user (CRT-3)", collCarts, putLineFilter(user, "p1", now)},
		{"put line, guest (CRT-3)", collCarts, putLineFilter(guest, "p1", now)},
		{"mark ordered (CRT-6)", collCarts, markOrderedFilter(user, "cart1")},
		{"retired cart", collCarts, retiredCartFilter(user, "cart1")},
		{"cart slot", collCarts, cartSlotFilter(guest)},
		{"session", collSessions, liveSessionFilter("s1", now)},
		{"bind session", collSessions, bindSessionFilter("s1", "alice", now)},
		{"history entry", collHistory, historyKey("alice", "o1")},
		{"history page", collHistory, historyFilter("alice", &historyCursor{At: 1, ID: "o1"})},
	}
	for _, c := range cases {
		key := ShardKeys[c.coll]
		if len(key) == 0 {
			t.Fatalf("%s: no shard key for %s", c.name, c.coll)
		}
		for _, k := range key {
			if _, ok := equalityOn(c.filter, k.Key); !ok {
				t.Errorf("%s: filter %v does not pin shard-key field %s of %s %v: it would be a broadcast", c.name, c.filter, k.Key, c.coll, key)
			}
		}
	}
}

// Under the alternative shard keys the same filters stay targeted where the docs say so.
func TestAlternativeKeysTargeting(t *testing.T) {
	user, guest := cart.User("alice"), cart.Guest("sess1")
	// carts {user_id: hashed}: the owner field is in every cart filter (null for guests).
	for _, f := range []bson.D{liveCartFilter(user, now), liveCartFilter(guest, now), markOrderedFilter(user, "c")} {
		if _, ok := equalityOn(f, "user_id"); !ok {
			t.Errorf("cart filter %v lacks user_id: broadcast under {user_id: hashed}", f)
		}
	}
	if v, _ := equalityOn(liveCartFilter(guest, now), "user_id"); v != nil {
		t.Errorf("guest cart filter pins user_id to %v, want null", v)
	}
	// products {category: hashed}: category equality; {_id: hashed}: _id equality.
	f := takeStockFilter(catalog.Ref{ID: "p1", Category: "tools"}, "eu", 1)
	for _, k := range []string{"category", "_id"} {
		if _, ok := equalityOn(f, k); !ok {
			t.Errorf("stock filter lacks %s", k)
		}
	}
	// search pins category only: targeted under {category, _id} and {category: hashed},
	// a broadcast under {_id: hashed} (that key trades search for spread).
	s := searchFilter(catalog.Search{Category: "tools"}, nil)
	if _, ok := equalityOn(s, "category"); !ok {
		t.Errorf("search filter lacks category: %v", s)
	}
	if _, ok := equalityOn(s, "_id"); ok {
		t.Errorf("search filter pins _id: %v", s)
	}
}

// ShardKeys matches the sharding spec's defaults (SHD-1) for the collections the spec shards.
func TestShardKeysMatchTheSpec(t *testing.T) {
	spec, err := sharding.NewSpec(sharding.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range spec.Collections {
		mine, ok := ShardKeys[c.Name]
		if !ok {
			t.Errorf("ShardKeys has no key for the spec's %s", c.Name)
			continue
		}
		want := c.Key.Doc()
		if len(mine) != len(want) {
			t.Errorf("%s: ShardKeys %v, spec %v", c.Name, mine, want)
			continue
		}
		for i := range want {
			if mine[i].Key != want[i].Key || fmt.Sprint(mine[i].Value) != fmt.Sprint(want[i].Value) {
				t.Errorf("%s: ShardKeys %v, spec %v", c.Name, mine, want)
			}
		}
	}
}

func TestStockFilterAndUpdate(t *testing.T) {
	f := takeStockFilter(catalog.Ref{ID: "p1", Category: "tools"}, "eu-west", 3)
	want := bson.D{{Key: "category", Value: "tools"}, {Key: "_id", Value: "p1"},
		{Key: "stock.eu-west", Value: bson.D{{Key: "$gte", Value: int64(3)}}}}
	if fmt.Sprint(f) != fmt.Sprint(want) {
		t.Errorf("take stock filter:\n got %v\nwant %v", f, want)
	}
	u := stockUpdate("eu-west", -3)
	if fmt.Sprint(u) != fmt.Sprint(bson.D{{Key: "$inc", Value: bson.D{{Key: "stock.eu-west", Value: int64(-3)}}}}) {
		t.Errorf("stock update: %v", u)
	}
	for _, z := range []string{"eu.west", "$where", "", "EU"} {
		var ve *validation.Error
		if err := checkZone(z); !errors.As(err, &ve) {
			t.Errorf("zone %q accepted as a field name: %v", z, err)
		}
	}
}

func TestCartLineFilters(t *testing.T) {
	u := cart.User("alice")
	put := putLineFilter(u, "p1", now)
	if v, ok := equalityOn(put, fmt.Sprintf("items.%d", cart.MaxItems-1)); ok || v != nil {
		t.Errorf("room guard must be an operator")
	}
	// The line is taken when the cart holds it, or when there is room for one more.
	want := fmt.Sprint(bson.D{{Key: "$or", Value: bson.A{bson.D{{Key: "items.product_id", Value: "p1"}},
		bson.D{{Key: "items.99", Value: bson.D{{Key: "$exists", Value: false}}}}}}})
	if got := fmt.Sprint(put); !strings.Contains(got, want) || !strings.Contains(got, `"checkout_order"`) {
		t.Errorf("put line filter %v lacks %v or the checkout guard", put, want)
	}
	live := liveCartFilter(cart.Guest("s1"), now)
	if got := fmt.Sprint(live); !strings.Contains(got, `"status":"active"`) || !strings.Contains(got, `"$gt"`) {
		t.Errorf("live filter must require active and unexpired: %v", live)
	}
	if activeCartID(cart.User("x")) == activeCartID(cart.Guest("x")) {
		t.Error("a user and a guest with the same id string share a cart slot")
	}
	if activeCartID(cart.User("x")) != "active:u:x" {
		t.Errorf("slot id %q", activeCartID(cart.User("x")))
	}
}

func TestClaimIDs(t *testing.T) {
	a, b := keyClaimID("ab", "c"), keyClaimID("a", "bc")
	if a == b {
		t.Error("(ab, c) and (a, bc) share an idempotency claim")
	}
	if keyClaimID("alice", "k") != keyClaimID("alice", "k") || !strings.HasPrefix(a, "k:") || len(a) != 2+64 {
		t.Errorf("key claim %q: want deterministic k:<sha256 hex>", a)
	}
	long := keyClaimID("u", strings.Repeat("x", 128))
	if len(long) != len(a) {
		t.Error("claim length depends on the key length")
	}
	ids := map[string]bool{cartClaimID("x"): true, orderClaimID("x"): true, productClaimID("x"): true, keyClaimID("x", ""): true}
	if len(ids) != 4 {
		t.Error("claims of different kinds collide")
	}
}

func TestEventObjectIDOrdersLikeTime(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 250*int(time.Millisecond), time.UTC)
	id, err := eventObjectID("u:alice", "e1", at)
	if err != nil {
		t.Fatal(err)
	}
	if !id.Timestamp().Equal(at.Truncate(time.Second)) {
		t.Errorf("ObjectId timestamp %v, want %v (the firehose boundaries rely on it)", id.Timestamp(), at.Truncate(time.Second))
	}
	later, _ := eventObjectID("u:alice", "e0", at.Add(time.Millisecond))
	if later.Hex() <= id.Hex() {
		t.Error("an event 1 ms later does not sort after")
	}
	again, _ := eventObjectID("u:alice", "e1", at)
	other, _ := eventObjectID("u:bob", "e1", at)
	twin, _ := eventObjectID("u:alice", "e2", at)
	if again != id || other == id || twin == id {
		t.Error("event ids must be deterministic per (actor, event id, instant) and distinct otherwise")
	}
	lo, hi := dayBounds(at.Add(5 * time.Hour))
	if !(lo.Hex() <= id.Hex() && id.Hex() < hi.Hex()) {
		t.Errorf("event %s outside its day [%s, %s)", id.Hex(), lo.Hex(), hi.Hex())
	}
	midnight, _ := eventObjectID("u:alice", "e", event.Day(at).Add(24*time.Hour))
	if midnight.Hex() < hi.Hex() {
		t.Error("an event at the next midnight falls inside the day")
	}
	if _, err := eventObjectID("u:a", "e", time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("an instant before 1970 was accepted")
	}
	before := later
	f := eventsFilter(event.Query{Actor: "u:alice", Day: at, Type: event.View}, &before)
	if v, ok := equalityOn(f, "user_id"); !ok || v != "u:alice" {
		t.Errorf("events filter lacks the actor: %v", f)
	}
	if got := fmt.Sprint(f); !strings.Contains(got, `"$lt":{"$oid":"`+before.Hex()+`"}`) || !strings.Contains(got, `"type":"view"`) {
		t.Errorf("events filter must bound _id by the cursor and filter the type: %v", f)
	}
}

func TestMoneyIsInt64Cents(t *testing.T) {
	p := catalog.Product{ID: "p1", Category: "c", Name: "n", Price: money.MustParse("19.99")}
	raw, err := bson.Marshal(toProductDoc(p))
	if err != nil {
		t.Fatal(err)
	}
	if v := bson.Raw(raw).Lookup("price"); v.Type != bson.TypeInt64 || v.Int64() != 1999 {
		t.Errorf("price stored as %s %v, want int64 1999", v.Type, v)
	}
	o := order.Order{ID: "o", Total: money.MustParse("27.50"), Items: []order.Item{{UnitPrice: money.MustParse("2.50"), Quantity: 3}}}
	raw, _ = bson.Marshal(toOrderDoc(o))
	if v := bson.Raw(raw).Lookup("total_price"); v.Type != bson.TypeInt64 || v.Int64() != 2750 {
		t.Errorf("total stored as %s %v", v.Type, v)
	}
	if v := bson.Raw(raw).Lookup("items", "0", "price"); v.Type != bson.TypeInt64 || v.Int64() != 250 {
		t.Errorf("item price stored as %s %v", v.Type, v)
	}
	// A double with a fraction (what mongosh writes for 19.99) is refused, not rounded.
	bad, _ := bson.Marshal(bson.D{{Key: "_id", Value: "p"}, {Key: "price", Value: 19.99}})
	var doc productDoc
	if err := bson.Unmarshal(bad, &doc); err == nil {
		t.Errorf("a fractional double decoded into cents as %d", doc.Price)
	}
	whole, _ := bson.Marshal(bson.D{{Key: "_id", Value: "p"}, {Key: "price", Value: int32(500)}})
	if err := bson.Unmarshal(whole, &doc); err != nil || doc.Price != 500 {
		t.Errorf("int32 price: %d, %v", doc.Price, err)
	}
}

func TestCursorsRoundTripAndRefuseForeignOnes(t *testing.T) {
	pc := priceCursor{Price: 750, ID: "p9"}
	var back priceCursor
	if err := paging.Decode(paging.Encode(pc), &back); err != nil || back != pc {
		t.Errorf("price cursor: %+v, %v", back, err)
	}
	f := searchFilter(catalog.Search{Category: "tools", MinPrice: 100}, &back)
	if got := fmt.Sprint(f); !strings.Contains(got, `"$gt":{"$numberLong":"750"}`) || !strings.Contains(got, `"_id":{"$gt":"p9"}`) {
		t.Errorf("search filter after cursor: %v", f)
	}
	hc := historyCursor{At: now.UnixMilli(), ID: "o1"}
	hf := historyFilter("alice", &hc)
	if got := fmt.Sprint(hf); !strings.Contains(got, "$lt") || !strings.Contains(got, "o1") {
		t.Errorf("history filter after cursor: %v", hf)
	}
	// An events cursor that is not an ObjectId is the same validation error as any foreign cursor.
	s := New(mustMockClient(t), Options{Database: mockDB})
	_, err := s.Events().ListEvents(t.Context(), event.Query{Actor: "u:a", Day: now,
		Page: paging.Request{Cursor: paging.Encode(eventCursor{ID: "not-hex"})}})
	var ve *validation.Error
	if !errors.As(err, &ve) {
		t.Errorf("foreign events cursor: got %v, want a validation error", err)
	}
}

func mustMockClient(t *testing.T) *mongo.Client {
	s, _ := mockStore(t, Options{})
	return s.client
}

func TestRetryClassification(t *testing.T) {
	cases := []struct {
		err  error
		want retryClass
	}{
		{errors.New("plain"), noRetry},
		{catalog.ErrNotFound, noRetry},
		{mongo.CommandError{Code: 112, Name: "WriteConflict", Labels: []string{labelTransient}}, retryTxn},
		{fmt.Errorf("wrapped: %w", mongo.CommandError{Code: 251, Labels: []string{labelTransient}}), retryTxn},
		{mongo.CommandError{Code: 91, Labels: []string{labelUnknownCommit}}, retryCommit},
		{mongo.CommandError{Code: 50, Name: "MaxTimeMSExpired", Labels: []string{labelUnknownCommit}}, noRetry},
		{mongo.CommandError{Code: 11000}, noRetry},
	}
	for _, c := range cases {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

func TestDupIndex(t *testing.T) {
	bwe := mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: mongo.WriteError{Index: 1, Code: 11000}}}}
	if i, ok := dupIndex(fmt.Errorf("x: %w", bwe)); !ok || i != claimCart {
		t.Errorf("dupIndex = %d, %v; want %d, true", i, ok, claimCart)
	}
	if _, ok := dupIndex(errors.New("x")); ok {
		t.Error("a plain error counted as a duplicate key")
	}
}

func TestSchemaIndexes(t *testing.T) {
	ixs := schemaIndexes()
	for coll, list := range ixs {
		if len(list) == 0 {
			t.Errorf("%s: empty index list (createIndexes refuses it)", coll)
		}
		names := map[string]bool{}
		for _, ix := range list {
			if names[ix.Name] {
				t.Errorf("%s: index %s twice", coll, ix.Name)
			}
			names[ix.Name] = true
		}
	}
	for coll, name := range map[string]string{collOutbox: "p_1_seq_1", collProducts: "category_price_id",
		collCarts: "expires_at_ttl", collSessions: "expires_at_ttl", collEvents: "actor_newest", collHistory: "user_newest"} {
		found := false
		for _, ix := range ixs[coll] {
			found = found || ix.Name == name
		}
		if !found {
			t.Errorf("%s lacks index %s", coll, name)
		}
	}
}

func TestReadRouting(t *testing.T) {
	s := New(mustMockClient(t), Options{Database: mockDB})
	if _, dec := s.reader(collOrders, readrouting.OpOrderHistory); dec.Target != readrouting.Primary {
		t.Errorf("no lag measured: %s, want primary", dec.Target)
	}
	s.lag = freshLag
	for op, want := range map[readrouting.Operation]readrouting.Target{
		readrouting.OpOrderHistory:   readrouting.Secondary,
		readrouting.OpOrderStatus:    readrouting.Secondary,
		readrouting.OpCategorySearch: readrouting.Secondary,
		readrouting.OpProductPage:    readrouting.Secondary,
		readrouting.OpCart:           readrouting.Primary,
		readrouting.OpStock:          readrouting.Primary,
	} {
		if _, dec := s.reader(collOrders, op); dec.Target != want {
			t.Errorf("%s: %s (%s), want %s", op, dec.Target, dec.Reason, want)
		}
	}
	if !needsPrimary(order.Order{Status: order.Created}, nil) || needsPrimary(order.Order{Status: order.Paid}, nil) ||
		!needsPrimary(order.Order{}, order.ErrNotFound) || needsPrimary(order.Order{}, errors.New("down")) {
		t.Error("needsPrimary: created and not-found must be confirmed on the primary, paid must not")
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"mongodb://user:secret@h1:27017,h2:27017/db?x=1": "mongodb://***@h1:27017,h2:27017/db?x=1",
		"mongodb://localhost:27017":                      "mongodb://localhost:27017",
		"mongodb+srv://u:p@cluster.example.net":          "mongodb+srv://***@cluster.example.net",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// productDocCodec is productDoc without its UnmarshalBSON: what the driver's codec decodes.
type productDocCodec productDoc

// The hand decoder of products documents gives what the driver's codec gives, and refuses what
// it refuses.
func TestProductDecoderMatchesTheCodec(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 123_000_000, time.UTC)
	docs := []any{
		toProductDoc(catalog.Product{ID: "p1", Category: "books", Name: "Book", Price: money.MustParse("19.99"),
			Attributes: map[string]string{"color": "red", "a.b$": "x"}, Stock: map[string]int64{"eu": 5, "us": 0}, CreatedAt: at, UpdatedAt: at}),
		bson.D{{Key: "_id", Value: "p2"}, {Key: "price", Value: int32(500)}, {Key: "stock", Value: bson.D{{Key: "eu", Value: 3.0}}}, {Key: "extra", Value: 1}},
		bson.D{{Key: "_id", Value: "p3"}, {Key: "attributes", Value: nil}, {Key: "stock", Value: nil}, {Key: "name", Value: nil}},
		bson.D{{Key: "_id", Value: "p4"}, {Key: "price", Value: 19.99}},
		bson.D{{Key: "_id", Value: "p5"}, {Key: "stock", Value: bson.D{{Key: "eu", Value: 1.5}}}},
		bson.D{{Key: "_id", Value: "p6"}, {Key: "name", Value: int32(7)}},
		bson.D{{Key: "_id", Value: "p7"}, {Key: "created_at", Value: "yesterday"}},
	}
	for _, in := range docs {
		raw, err := bson.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var hand productDoc
		var codec productDocCodec
		herr, cerr := bson.Unmarshal(raw, &hand), bson.Unmarshal(raw, &codec)
		if (herr == nil) != (cerr == nil) {
			t.Errorf("%s: hand decoder error %v, codec error %v", bson.Raw(raw), herr, cerr)
			continue
		}
		if herr != nil {
			continue
		}
		c := productDoc(codec)
		c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
		if !reflect.DeepEqual(hand, c) {
			t.Errorf("%s:\nhand  %+v\ncodec %+v", bson.Raw(raw), hand, c)
		}
	}
}
