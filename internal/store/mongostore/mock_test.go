package mongostore

// These tests run the repositories against the driver's mock deployment
// (x/mongo/driver/drivertest, exported but experimental in v2): the client sends real command
// documents, which a CommandMonitor records, and each command gets the next scripted server
// reply. They check the wire commands (shard key in the filters, transaction fields) and the
// convenient transaction API's retries on TransientTransactionError and
// UnknownTransactionCommitResult. The replies are scripted, not a server's: these tests say
// nothing about how a real cluster behaves; TestContract does, when it runs.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/drivertest"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/xoptions"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/readrouting"
	"github.com/shardmart/shardmart/internal/store"
)

const mockDB = "mockdb"

// recorder keeps every command the client started.
type recorder struct {
	mu   sync.Mutex
	cmds []bson.Raw
}

func (r *recorder) started(_ context.Context, ev *event.CommandStartedEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cmds = append(r.cmds, append(bson.Raw(nil), ev.Command...))
}

func (r *recorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.cmds))
	for i, c := range r.cmds {
		out[i] = c.Index(0).Key()
	}
	return out
}

func (r *recorder) cmd(i int) bson.Raw {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmds[i]
}

// mockStore is a Store on a mock deployment that answers with replies, in order.
func mockStore(t *testing.T, o Options, replies ...bson.D) (*Store, *recorder) {
	t.Helper()
	md := drivertest.NewMockDeployment(replies...)
	rec := &recorder{}
	opts := options.Client().SetMonitor(&event.CommandMonitor{Started: rec.started})
	if err := xoptions.SetInternalClientOptions(opts, "deployment", md); err != nil {
		t.Fatal(err)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	o.Database = mockDB
	return New(client, o), rec
}

// Scripted replies.
func ok() bson.D { return d(e("ok", 1)) }
func inserted(n int) bson.D {
	return d(e("ok", 1), e("n", int32(n)))
}
func batch(coll string, docs ...any) bson.D {
	return d(e("ok", 1), e("cursor", d(e("id", int64(0)), e("ns", mockDB+"."+coll), e("firstBatch", append(bson.A{}, docs...)))))
}
func modified(doc any) bson.D {
	return d(e("ok", 1), e("value", doc), e("lastErrorObject", d(e("n", int32(1)), e("updatedExisting", true))))
}
func notModified() bson.D {
	return d(e("ok", 1), e("value", nil), e("lastErrorObject", d(e("n", int32(0)), e("updatedExisting", false))))
}
func labelled(code int32, name string, labels ...string) bson.D {
	ls := bson.A{}
	for _, l := range labels {
		ls = append(ls, l)
	}
	return d(e("ok", 0), e("code", code), e("codeName", name), e("errmsg", "scripted "+name), e("errorLabels", ls))
}
func dupKeyAt(index int) bson.D {
	return d(e("ok", 1), e("n", int32(0)), e("writeErrors", bson.A{
		d(e("index", int32(index)), e("code", int32(11000)), e("errmsg", "E11000 duplicate key error (scripted)")),
	}))
}

// lookup reads a dotted path of a command document.
func lookup(t *testing.T, cmd bson.Raw, path ...string) bson.RawValue {
	t.Helper()
	v, err := cmd.LookupErr(path...)
	if err != nil {
		t.Fatalf("command %s has no %v: %v", cmd, path, err)
	}
	return v
}

// readMode is the $readPreference mode a command carries ("" when none).
func readMode(cmd bson.Raw) string {
	v, err := cmd.LookupErr("$readPreference", "mode")
	if err != nil {
		return ""
	}
	return v.StringValue()
}

func wantNames(t *testing.T, rec *recorder, want ...string) {
	t.Helper()
	got := rec.names()
	if len(got) != len(want) {
		t.Fatalf("commands: got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("commands: got %v, want %v", got, want)
		}
	}
}

var (
	widget = productDoc{ID: "p1", Category: "tools", Name: "Widget", Price: 1250,
		Stock: map[string]int64{"eu": 3}, Attributes: []kvDoc{}}
	placeReq = order.Placement{OrderID: "o1", UserID: "alice", CartID: "cart1", CartOwner: "u:alice",
		Zone: "eu", IdempotencyKey: "key-1", At: time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC),
		Lines: []order.Line{{ProductID: "p1", Category: "tools", Quantity: 2}}}
)

func TestPlaceRetriesTransientErrorThenUnknownCommit(t *testing.T) {
	s, rec := mockStore(t, Options{},
		// attempt 1: the first read of the transaction loses a write conflict
		labelled(112, "WriteConflict", labelTransient),
		ok(), // abortTransaction
		// attempt 2
		batch(collClaims), // no order under the key yet
		inserted(3),       // key, cart and order-id claims
		modified(widget),  // stock taken, product returned
		inserted(1),       // the order
		modified(d(e("_id", counterID(0)), e("seq", int64(7)))),
		inserted(1), // outbox row
		labelled(8, "UnknownError", labelUnknownCommit),
		ok(), // the retried commit
	)
	o, created, err := s.Orders().Place(context.Background(), placeReq)
	if err != nil || !created {
		t.Fatalf("place: created=%v err=%v", created, err)
	}
	if o.Total != 2500 || len(o.Items) != 1 || o.Items[0].Name != "Widget" || o.Items[0].UnitPrice != 1250 {
		t.Errorf("order priced from the returned product: %+v", o)
	}
	wantNames(t, rec, "find", "abortTransaction",
		"find", "insert", "findAndModify", "insert", "findAndModify", "insert", "commitTransaction", "commitTransaction")

	// Each attempt is a new transaction (txnNumber) that starts with startTransaction and snapshot reads.
	first, second := rec.cmd(0), rec.cmd(2)
	for _, c := range []bson.Raw{first, second} {
		if !lookup(t, c, "startTransaction").Boolean() || lookup(t, c, "autocommit").Boolean() {
			t.Errorf("first command of a transaction: %s", c)
		}
		if lvl := lookup(t, c, "readConcern", "level").StringValue(); lvl != "snapshot" {
			t.Errorf("read concern %q, want snapshot", lvl)
		}
	}
	if lookup(t, first, "txnNumber").Int64() == lookup(t, second, "txnNumber").Int64() {
		t.Error("the retried attempt reused the aborted transaction's txnNumber")
	}
	for _, i := range []int{3, 4, 5, 6, 7, 8, 9} {
		if lookup(t, rec.cmd(i), "txnNumber").Int64() != lookup(t, second, "txnNumber").Int64() {
			t.Errorf("command %d (%s) is outside the second transaction", i, rec.names()[i])
		}
	}
	// Both commits ask for a majority.
	for _, i := range []int{8, 9} {
		if w := lookup(t, rec.cmd(i), "writeConcern", "w").StringValue(); w != "majority" {
			t.Errorf("commit %d write concern w=%q, want majority", i, w)
		}
	}
	// The stock update is targeted by the full products shard key and guarded in its filter.
	fam := rec.cmd(4)
	if lookup(t, fam, "findAndModify").StringValue() != collProducts {
		t.Fatalf("command 4 is not the stock update: %s", fam)
	}
	q := lookup(t, fam, "query").Document()
	if q.Lookup("category").StringValue() != "tools" || q.Lookup("_id").StringValue() != "p1" ||
		q.Lookup("stock.eu", "$gte").Int64() != 2 {
		t.Errorf("stock filter: %s", q)
	}
	if lookup(t, fam, "update", "$inc", "stock.eu").Int64() != -2 {
		t.Errorf("stock update: %s", lookup(t, fam, "update"))
	}
	// The order carries money as int64 cents.
	doc := lookup(t, rec.cmd(5), "documents").Array().Index(0).Document()
	if tp := doc.Lookup("total_price"); tp.Type != bson.TypeInt64 || tp.Int64() != 2500 {
		t.Errorf("total_price: %v (%s), want int64 2500", tp, tp.Type)
	}
}

// placeShort places placeReq against a transaction that sees 1 left where 2 are requested and
// aborts; the linearizable confirmation then reads committed.
func placeShort(t *testing.T, committed productDoc) (*recorder, error) {
	short := widget
	short.Stock = map[string]int64{"eu": 1}
	claim := claimDoc{ID: productClaimID("p1"), Category: "tools"}
	s, rec := mockStore(t, Options{},
		batch(collClaims), inserted(3),
		notModified(),              // the guard refused
		batch(collProducts, short), // the diagnosis read: the product is there, with 1 left
		ok(),                       // abortTransaction
		batch(collClaims, claim),   // the confirmation: the claim gives the category,
		batch(collProducts, committed),
	)
	_, _, err := s.Orders().Place(context.Background(), placeReq)
	wantNames(t, rec, "find", "insert", "findAndModify", "find", "abortTransaction", "find", "find")
	return rec, err
}

func TestPlaceShortStockAbortsWithoutRetry(t *testing.T) {
	committed := widget
	committed.Stock = map[string]int64{"eu": 1}
	rec, err := placeShort(t, committed)
	var se *catalog.InsufficientStockError
	if !errors.As(err, &se) || se.ProductID != "p1" || se.Available != 1 || se.Requested != 2 || se.Zone != "eu" {
		t.Fatalf("got %v, want InsufficientStockError p1 eu requested 2 available 1", err)
	}
	if errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a confirmed shortage is reported as unavailable: %v", err)
	}
	if q := lookup(t, rec.cmd(3), "filter").Document(); q.Lookup("category").StringValue() != "tools" {
		t.Errorf("diagnosis read is not targeted: %s", q)
	}
	for _, i := range []int{5, 6} {
		if lvl := lookup(t, rec.cmd(i), "readConcern", "level").StringValue(); lvl != "linearizable" {
			t.Errorf("confirmation read %d: read concern %q, want linearizable", i, lvl)
		}
	}
}

// The transaction saw too little stock, but the linearizable read finds enough committed: the
// aborted transaction read writes no majority holds, so the outcome is open, not a refusal.
func TestPlaceShortStockUnconfirmedIsUnavailable(t *testing.T) {
	_, err := placeShort(t, widget) // 3 committed cover the 2 requested
	var se *catalog.InsufficientStockError
	if !errors.Is(err, store.ErrUnavailable) || errors.As(err, &se) {
		t.Fatalf("got %v, want store.ErrUnavailable and no InsufficientStockError", err)
	}
}

func TestPlaceDuplicateKeyClaimReturnsFirstOrder(t *testing.T) {
	first := toOrderDoc(order.Order{ID: "o0", UserID: "alice", CartID: "cart0", Zone: "eu", Status: order.Created,
		IdempotencyKey: "key-1", Total: 1250, CreatedAt: placeReq.At, UpdatedAt: placeReq.At})
	s, rec := mockStore(t, Options{},
		batch(collClaims), // the transaction's snapshot predates the other order's commit
		dupKeyAt(claimKey),
		ok(), // abortTransaction
		batch(collClaims, claimDoc{ID: keyClaimID("alice", "key-1"), UserID: "alice", OrderID: "o0", At: placeReq.At}),
		batch(collOrders, first),
	)
	o, created, err := s.Orders().Place(context.Background(), placeReq)
	if err != nil || created || o.ID != "o0" {
		t.Fatalf("got order %q created=%v err=%v; want the first order o0, created=false", o.ID, created, err)
	}
	wantNames(t, rec, "find", "insert", "abortTransaction", "find", "find")
	if f := lookup(t, rec.cmd(4), "filter").Document(); f.Lookup("user_id").StringValue() != "alice" || f.Lookup("_id").StringValue() != "o0" {
		t.Errorf("order read is not targeted by user_id: %s", f)
	}
}

func TestPlaceSecondOrderFromOneCart(t *testing.T) {
	s, _ := mockStore(t, Options{}, batch(collClaims), dupKeyAt(claimCart), ok())
	if _, _, err := s.Orders().Place(context.Background(), placeReq); !errors.Is(err, order.ErrCartAlreadyOrdered) {
		t.Fatalf("got %v, want ErrCartAlreadyOrdered", err)
	}
}

func TestNonTransientErrorAbortsOnce(t *testing.T) {
	// A non-transient server error inside the transaction aborts it once and is returned as is.
	s, rec := mockStore(t, Options{}, labelled(2, "BadValue"), ok())
	_, _, err := s.Orders().Place(context.Background(), placeReq)
	var ce mongo.CommandError
	if !errors.As(err, &ce) || ce.Code != 2 {
		t.Fatalf("got %v, want the BadValue command error", err)
	}
	wantNames(t, rec, "find", "abortTransaction")
}

// freshLag is a snapshot in which every secondary is current: reads with a budget may use them.
func freshLag() readrouting.LagSnapshot {
	return readrouting.LagSnapshot{MeasuredAt: time.Now(), Members: []readrouting.MemberLag{
		{Shard: "shard1", Host: "h1:27018", State: readrouting.StatePrimary, Known: true},
		{Shard: "shard1", Host: "h2:27018", State: readrouting.StateSecondary, Known: true},
	}}
}

func TestGetOrderConfirmsCreatedOnPrimary(t *testing.T) {
	claim := claimDoc{ID: orderClaimID("o1"), UserID: "alice", OrderID: "o1", At: placeReq.At}
	doc := func(st order.Status) orderDoc {
		return toOrderDoc(order.Order{ID: "o1", UserID: "alice", Status: st, CreatedAt: placeReq.At, UpdatedAt: placeReq.At})
	}
	for _, tc := range []struct {
		name   string
		status order.Status
		lag    func() readrouting.LagSnapshot
		reads  int
	}{
		{"paid on a secondary is final", order.Paid, freshLag, 2},
		{"created on a secondary is confirmed on the primary", order.Created, freshLag, 4},
		{"no lag measured: primary at once", order.Created, nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replies := []bson.D{batch(collClaims, claim), batch(collOrders, doc(tc.status))}
			if tc.reads == 4 {
				replies = append(replies, batch(collClaims, claim), batch(collOrders, doc(order.Paid)))
			}
			s, rec := mockStore(t, Options{Lag: tc.lag}, replies...)
			o, err := s.Orders().GetOrder(context.Background(), "o1")
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.names()) != tc.reads {
				t.Errorf("%d reads (%v), want %d", len(rec.names()), rec.names(), tc.reads)
			}
			if tc.reads == 4 && o.Status != order.Paid {
				t.Errorf("status %s, want the primary's paid", o.Status)
			}
			for i, name := range rec.names() {
				onSecondary := readMode(rec.cmd(i)) == "secondaryPreferred"
				if want := tc.lag != nil && i < 2; onSecondary != want {
					t.Errorf("read %d (%s) on a secondary: %v, want %v", i, name, onSecondary, want)
				}
			}
		})
	}
}

// A put is one findAndModify with upsert, addressed by the owner's slot and returning the cart
// written: no read before it and none after, whether the slot is empty, holds the line or
// holds other lines.
func TestPutItemIsOneUpsertBySlot(t *testing.T) {
	now := placeReq.At
	owner := cart.User("alice")
	holding := func(ids ...string) cartDoc {
		c := newCartDoc(owner, "cart1", time.Time{}, now)
		for _, id := range ids {
			c.Items = append(c.Items, cartItemDoc{ProductID: id, Category: "tools", Quantity: 1, AddedAt: now})
		}
		return c
	}
	for _, tc := range []struct {
		name  string
		reply cartDoc
	}{
		{"no cart yet", holding("p2")},
		{"line held", holding("p2")},
		{"new line", holding("p1", "p2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rec := mockStore(t, Options{}, modified(tc.reply))
			got, err := s.Carts().PutItem(context.Background(), owner, cart.Item{ProductID: "p2", Category: "tools", Quantity: 1, AddedAt: now}, time.Time{}, now)
			if err != nil || got.Owner != owner || !slices.ContainsFunc(got.Items, func(it cart.Item) bool { return it.ProductID == "p2" }) {
				t.Fatalf("put: %+v, %v", got, err)
			}
			wantNames(t, rec, "findAndModify")
			w := rec.cmd(0)
			q := lookup(t, w, "query").Document()
			if q.Lookup("_id").StringValue() != "active:u:alice" || q.Lookup("user_id").StringValue() != "alice" {
				t.Errorf("cart write not addressed by the owner's slot: %s", q)
			}
			if !lookup(t, w, "upsert").Boolean() || !lookup(t, w, "new").Boolean() {
				t.Errorf("put must upsert and return the cart written: %s", w)
			}
			if lookup(t, w, "update").Type != bson.TypeArray {
				t.Errorf("put's update is not a pipeline: %s", lookup(t, w, "update"))
			}
		})
	}
}

func mustValues(t *testing.T, a bson.RawArray) []bson.RawValue {
	t.Helper()
	vs, err := a.Values()
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestTransientCommitErrorRerunsTheTransaction(t *testing.T) {
	p := catalog.Product{ID: "p1", Category: "tools", Name: "Widget", Price: 1250, CreatedAt: placeReq.At, UpdatedAt: placeReq.At}
	counter := modified(d(e("_id", counterID(0)), e("seq", int64(1))))
	s, rec := mockStore(t, Options{},
		inserted(1), inserted(1), counter, inserted(1), // claim, product, counter, outbox
		labelled(251, "NoSuchTransaction", labelTransient), // the commit: the whole transaction runs again
		inserted(1), inserted(1), counter, inserted(1),
		ok(),
	)
	if err := s.Products().CreateProduct(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	wantNames(t, rec, "insert", "insert", "findAndModify", "insert", "commitTransaction",
		"insert", "insert", "findAndModify", "insert", "commitTransaction")
	if lookup(t, rec.cmd(0), "txnNumber").Int64() == lookup(t, rec.cmd(5), "txnNumber").Int64() {
		t.Error("the re-run reused the failed transaction's number")
	}
	if !lookup(t, rec.cmd(5), "startTransaction").Boolean() {
		t.Error("the re-run did not start a new transaction")
	}
	if id := lookup(t, rec.cmd(0), "documents").Array().Index(0).Document().Lookup("_id").StringValue(); id != "p:p1" {
		t.Errorf("product claim _id %q, want p:p1", id)
	}
}

// A slot that takes no edit makes the upsert collide on _id; only then is the slot read, and an
// ordered cart is retired with the new cart starting with the line.
func TestPutItemRetiresAnOrderedCart(t *testing.T) {
	now := placeReq.At
	owner := cart.User("alice")
	ordered := newCartDoc(owner, "cart-old", time.Time{}, now)
	ordered.Status = string(cart.Ordered)
	ordered.OrderID = "o1"
	s, rec := mockStore(t, Options{},
		labelled(11000, "DuplicateKey"), // the upsert's insert collides with the ordered cart
		batch(collCarts, ordered),       // the slot holds the ordered cart
		inserted(1),                     // retired copy
		d(e("ok", 1), e("n", int32(1)), e("nModified", int32(1))), // slot replaced
	)
	got, err := s.Carts().PutItem(context.Background(), owner, cart.Item{ProductID: "p2", Category: "tools", Quantity: 1, AddedAt: now}, time.Time{}, now)
	if err != nil || got.ID == "cart-old" || got.Status != cart.Active || len(got.Items) != 1 || got.Items[0].ProductID != "p2" {
		t.Fatalf("put after order: %+v, %v", got, err)
	}
	wantNames(t, rec, "findAndModify", "find", "insert", "update")
	retired := lookup(t, rec.cmd(2), "documents").Array().Index(0).Document()
	if retired.Lookup("_id").StringValue() != "cart-old" || retired.Lookup("status").StringValue() != "ordered" {
		t.Errorf("retired copy: %s", retired)
	}
	u := lookup(t, rec.cmd(3), "updates").Array().Index(0).Document()
	q := u.Lookup("q").Document()
	if q.Lookup("_id").StringValue() != "active:u:alice" || q.Lookup("cart_id").StringValue() != "cart-old" {
		t.Errorf("slot replace must compare-and-set on the old cart: %s", q)
	}
	if line := u.Lookup("u", "items").Array().Index(0).Document(); line.Lookup("product_id").StringValue() != "p2" {
		t.Errorf("the new cart does not start with the line: %s", u)
	}
}

func TestGetProductFallsBackToThePrimary(t *testing.T) {
	claim := claimDoc{ID: productClaimID("p1"), Category: "tools"}
	s, rec := mockStore(t, Options{Lag: freshLag},
		batch(collClaims), // the secondary has not seen the product yet
		batch(collClaims, claim), batch(collProducts, widget),
	)
	p, err := s.Products().GetProduct(context.Background(), "p1")
	if err != nil || p.Name != "Widget" || p.Price != 1250 {
		t.Fatalf("get: %+v, %v", p, err)
	}
	wantNames(t, rec, "find", "find", "find")
	if f := lookup(t, rec.cmd(2), "filter").Document(); f.Lookup("category").StringValue() != "tools" {
		t.Errorf("product read not targeted: %s", f)
	}
	if m := readMode(rec.cmd(0)); m != "secondaryPreferred" {
		t.Errorf("product page read with lag in budget: mode %q, want secondaryPreferred", m)
	}
	if lookup(t, rec.cmd(0), "$readPreference", "maxStalenessSeconds").Int32() != 90 {
		t.Error("secondary read without the 90 s maxStaleness backstop")
	}
	for _, i := range []int{1, 2} {
		if m := readMode(rec.cmd(i)); m == "secondaryPreferred" {
			t.Errorf("fallback read %d still goes to secondaries", i)
		}
	}
}
