package cassandrastore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/projection"
)

// handlerSet collects the projector's handlers so a test can apply messages in an order a
// partitioned outbox allows: the messages of different keys (a product's change, an order)
// sit in different partitions, which are drained at once, in no fixed order.
type handlerSet map[string][]outbox.Handler

func (h handlerSet) Handle(topic string, f outbox.Handler) { h[topic] = append(h[topic], f) }

func (h handlerSet) apply(t *testing.T, m outbox.Message) {
	t.Helper()
	for _, f := range h[m.Topic] {
		if err := f(context.Background(), m); err != nil {
			t.Errorf("apply %s #%d: %v", m.Topic, m.Seq, err)
		}
	}
}

// stockCase creates a product with stock 100 in the store of record and places `orders`
// orders of one unit each; it returns the product id and the outbox messages of both.
func stockCase(t *testing.T, orders int) (st stockStores, id string, msgs []outbox.Message) {
	t.Helper()
	ctx := context.Background()
	placed := openPlaced(t)
	st = stockStores{products: placed.Products, orders: placed.Orders, sink: placed.CatalogSink, model: placed.Catalog}
	id = fmt.Sprintf("stock%d", time.Now().UnixNano()%1e12)
	// Stamped as the API stamps a new product: the current time, to the nanosecond.
	now := time.Now()
	p := catalog.Product{ID: id, Name: "Mug", Category: "mugs", Price: money.MustParse("12.50"),
		Stock: map[string]int64{"eu-west": 100}, CreatedAt: now, UpdatedAt: now}
	if err := placed.Products.CreateProduct(ctx, p); err != nil {
		t.Fatal(err)
	}
	for i := range orders {
		user := fmt.Sprintf("%s-u%d", id, i)
		if _, _, err := placed.Orders.Place(ctx, order.Placement{OrderID: fmt.Sprintf("%s-o%d", id, i), UserID: user,
			CartID: fmt.Sprintf("%s-c%d", id, i), CartOwner: cart.User(user).Key(), Zone: "eu-west", IdempotencyKey: "k",
			Lines: []order.Line{{ProductID: id, Category: "mugs", Quantity: 1}}, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := placed.Outbox.ReadOutbox(ctx, 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if m.Topic != outbox.TopicOrderStatus {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) != orders+1 {
		t.Fatalf("outbox holds %d messages, want the product's and %d orders'", len(msgs), orders)
	}
	return st, id, msgs
}

type stockStores struct {
	products catalog.Repository
	orders   order.Repository
	sink     projection.CatalogSink
	model    catalog.Reader
}

// modelStock is the read model's stock (the product page's figure) next to the store's.
func (s stockStores) modelStock(t *testing.T, id string) (model, store int64) {
	t.Helper()
	ctx := context.Background()
	m, err := s.model.GetProduct(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.products.GetProduct(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return m.Stock["eu-west"], p.Stock["eu-west"]
}

// TestCatalogStockOrderAppliedBeforeProductChange: an order's follow-up applied before the
// follow-up of the product's creation (their partitions drained at once) must not leave the
// read model with the stock from before the order.
func TestCatalogStockOrderAppliedBeforeProductChange(t *testing.T) {
	st, id, msgs := stockCase(t, 1)
	h := handlerSet{}
	projection.RegisterCatalog(h, st.sink, st.products)
	h.apply(t, msgs[1]) // order.placed
	h.apply(t, msgs[0]) // product.changed (the creation, stock 100)
	if model, store := st.modelStock(t, id); model != store {
		t.Errorf("read model stock %d after both follow-ups, the store holds %d", model, store)
	}
}

// TestCatalogStockConcurrentFollowUps: a product's change and 12 orders of it, their
// follow-ups applied at once in a random order (as a drain's keys and partitions are): the
// read model ends with the store's stock.
func TestCatalogStockConcurrentFollowUps(t *testing.T) {
	st, id, msgs := stockCase(t, 12)
	h := handlerSet{}
	projection.RegisterCatalog(h, st.sink, st.products)
	rand.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	var wg sync.WaitGroup
	for _, m := range msgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.apply(t, m)
		}()
	}
	wg.Wait()
	if model, store := st.modelStock(t, id); model != store || store != 88 {
		t.Errorf("read model stock %d after every follow-up, the store holds %d (want 88)", model, store)
	}
}

// TestProvisionalCatalogCopy: a request's own copy of a product (catalog.WithReadAt) is ordered
// by when it read the store of record: a copy read before the projector's write loses to it,
// one read after wins, and one that would move a search key (a price read stale) is left to
// the projector. A product the projector has not copied yet is written by the request (its
// page shows it), without search rows, and the projector's copy wins over it.
func TestProvisionalCatalogCopy(t *testing.T) {
	ctx := context.Background()
	placed := openPlaced(t)
	id := fmt.Sprintf("prov%d", time.Now().UnixNano()%1e12)
	now := time.Now()
	p := catalog.Product{ID: id, Name: "Mug", Category: "mugs-" + id, Price: money.MustParse("12.50"),
		Stock: map[string]int64{"eu-west": 90}, CreatedAt: now, UpdatedAt: now}
	readBefore := time.Now()
	inSearch := func() bool {
		t.Helper()
		page, err := placed.Catalog.SearchProducts(ctx, catalog.Search{Category: p.Category, Page: paging.Request{Limit: 10}})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Items) == 1 && page.Items[0].ID == id
	}
	first := p
	first.Stock = map[string]int64{"eu-west": 95}
	if err := placed.CatalogSink.UpsertProduct(catalog.WithReadAt(ctx, time.Now()), first); err != nil {
		t.Fatal(err)
	}
	if m, err := placed.Catalog.GetProduct(ctx, id); err != nil || m.Stock["eu-west"] != 95 {
		t.Fatalf("product page after a request's copy of a product not in the read model: %+v, %v; want stock 95", m, err)
	}
	if inSearch() {
		t.Error("a request's copy of a new product wrote its search rows, which are the projector's")
	}
	if err := placed.CatalogSink.UpsertProduct(ctx, p); err != nil { // the projector's copy
		t.Fatal(err)
	}
	if !inSearch() {
		t.Error("the projector's copy left the product out of search")
	}
	stockAndPrice := func() (int64, money.Amount) {
		t.Helper()
		m, err := placed.Catalog.GetProduct(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return m.Stock["eu-west"], m.Price
	}
	stale := p
	stale.Stock = map[string]int64{"eu-west": 100}
	if err := placed.CatalogSink.UpsertProduct(catalog.WithReadAt(ctx, readBefore), stale); err != nil {
		t.Fatal(err)
	}
	if stock, _ := stockAndPrice(); stock != 90 {
		t.Errorf("stock %d after a copy read before the projector's, want the projector's 90", stock)
	}
	later := p
	later.Stock = map[string]int64{"eu-west": 80}
	if err := placed.CatalogSink.UpsertProduct(catalog.WithReadAt(ctx, time.Now()), later); err != nil {
		t.Fatal(err)
	}
	if stock, _ := stockAndPrice(); stock != 80 {
		t.Errorf("stock %d after a copy read after the projector's, want its 80", stock)
	}
	moved := later
	moved.Price = money.MustParse("9.00")
	if err := placed.CatalogSink.UpsertProduct(catalog.WithReadAt(ctx, time.Now()), moved); err != nil {
		t.Fatal(err)
	}
	if _, price := stockAndPrice(); price != p.Price {
		t.Errorf("price %s after a provisional copy with another price, want the projector's %s", price, p.Price)
	}
}
