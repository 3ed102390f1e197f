package cassandrastore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/projection"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// allOnCassandra places every family Cassandra can hold there; orders stay embedded.
const allOnCassandra = "carts=cassandra,sessions=cassandra,events=cassandra,history=cassandra,catalog=cassandra"

// allOnCassandraConfig is the placement allOnCassandra names.
func allOnCassandraConfig(t *testing.T) placement.Config {
	t.Helper()
	cfg, err := placement.Parse(allOnCassandra)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func openPlaced(t *testing.T) *placement.Stores {
	t.Helper()
	hosts, ks := cassandrastore.ClusterForTest(t)
	cfg := allOnCassandraConfig(t)
	st, err := placement.Open(context.Background(), cfg, placement.Options{
		SQLitePath: filepath.Join(t.TempDir(), "orders.db"), CassandraHosts: hosts, CassandraKeyspace: ks})
	if err != nil {
		t.Fatalf("placement.Open(%s): %v", cfg, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestPlacementOpensCassandra(t *testing.T) {
	st := openPlaced(t)
	// Placement measures every repository it opens (a wrapper whose next is the backend's own).
	if got := measured(st.Carts); got != reflect.TypeOf(&cassandrastore.CartsRepo{}) {
		t.Errorf("carts served by %v, want the Cassandra carts repository", got)
	}
	if got := measured(st.Catalog); got != reflect.TypeOf(&cassandrastore.Catalog{}) || st.CatalogSink == nil {
		t.Errorf("catalog served by %v (sink %T), want the Cassandra read model", got, st.CatalogSink)
	}
	hosts, _ := cassandrastore.ClusterForTest(t)
	_, err := placement.Open(context.Background(), placement.Config{
		placement.Orders: placement.SQLite, placement.Carts: placement.Cassandra, placement.Sessions: placement.SQLite,
		placement.Events: placement.SQLite, placement.History: placement.SQLite, placement.Catalog: placement.SQLite,
	}, placement.Options{SQLitePath: filepath.Join(t.TempDir(), "x.db"), CassandraHosts: hosts, CassandraKeyspace: "no_such_keyspace"})
	if err == nil || !strings.Contains(err.Error(), "schema apply") {
		t.Errorf("keyspace without schema: got %v, want an error telling to run schema apply", err)
	}
}

// killSwitch wraps the projector's targets: once a run has made `at` writes it "kills the
// projector" right after a write and before the checkpoint, in turn by panicking (a crash:
// nothing checkpointed), by cancelling the projector's context (a shutdown mid-batch) and by
// failing the call after the write landed (a timeout whose write was applied: the
// projector checkpoints what came before and retries this one).
type killSwitch struct {
	at     int64 // writes in this run before the kill; 0 = never
	run    atomic.Int64
	calls  atomic.Int64
	kills  atomic.Int64
	cancel context.CancelFunc
}

var errTimeoutAfterWrite = errors.New("write timed out (but was applied)")

func (k *killSwitch) after(ctx context.Context, err error) error {
	if err != nil {
		return err
	}
	k.calls.Add(1)
	if k.run.Add(1) != k.at {
		return nil
	}
	switch k.kills.Add(1) % 3 {
	case 1:
		panic("projector killed")
	case 2:
		k.cancel()
		return ctx.Err()
	default:
		return errTimeoutAfterWrite
	}
}

type killHistory struct {
	history.Repository
	k *killSwitch
}

func (h killHistory) UpsertEntry(ctx context.Context, e history.Entry) error {
	return h.k.after(ctx, h.Repository.UpsertEntry(ctx, e))
}

type killSink struct {
	projection.CatalogSink
	k *killSwitch
}

func (s killSink) UpsertProduct(ctx context.Context, p catalog.Product) error {
	return s.k.after(ctx, s.CatalogSink.UpsertProduct(ctx, p))
}

// TestProjectorKilledMidwayConverges drives the outbox of a real SQLite store into the
// Cassandra history and catalog read models with a projector killed every few writes, then
// restarted, and checks that both read models hold every order and product exactly once,
// in their final state: no duplicate, no gap.
func TestProjectorKilledMidwayConverges(t *testing.T) {
	st := openPlaced(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	cat := fmt.Sprintf("conv%d", time.Now().UnixNano()%1e9)

	var products []catalog.Product
	for i := 0; i < 6; i++ {
		p := catalog.Product{ID: fmt.Sprintf("%s-p%d", cat, i), Name: fmt.Sprintf("Item %d", i), Category: cat,
			Price: money.Amount(100 * (i + 1)), Stock: map[string]int64{"eu": 1000}, CreatedAt: now, UpdatedAt: now}
		if err := st.Products.CreateProduct(ctx, p); err != nil {
			t.Fatal(err)
		}
		products = append(products, p)
	}
	// Orders: 5 users x 6 orders; the first order of each user comes from a real Cassandra
	// cart (the projector must mark it ordered), two orders of each user share an instant.
	type placed struct{ user, id string }
	var orders []placed
	firstCarts := map[string]string{}
	for u := 0; u < 5; u++ {
		user := fmt.Sprintf("%s-u%d", cat, u)
		for i := 0; i < 6; i++ {
			cartID := fmt.Sprintf("%s-cart-%d-%d", cat, u, i)
			if i == 0 {
				c, err := st.Carts.PutItem(ctx, cart.User(user), cart.Item{ProductID: products[0].ID, Category: cat, Quantity: 1, AddedAt: now}, time.Time{}, now)
				if err != nil {
					t.Fatal(err)
				}
				cartID, firstCarts[user] = c.ID, c.ID
			}
			at := now.Add(time.Duration(i) * time.Minute)
			if i == 5 {
				at = now.Add(4 * time.Minute) // same instant as order 4
			}
			o, _, err := st.Orders.Place(ctx, order.Placement{OrderID: fmt.Sprintf("%s-o%d-%d", cat, u, i), UserID: user, CartID: cartID,
				CartOwner: cart.User(user).Key(), Zone: "eu", IdempotencyKey: fmt.Sprintf("k%d", i),
				Lines: []order.Line{{ProductID: products[i%len(products)].ID, Category: cat, Quantity: int64(1 + i)}}, At: at})
			if err != nil {
				t.Fatal(err)
			}
			orders = append(orders, placed{user, o.ID})
		}
	}
	// Status changes and price changes interleave with the placements in the outbox.
	for i, o := range orders {
		at := now.Add(time.Hour + time.Duration(i)*time.Second)
		switch i % 3 {
		case 0:
			if _, err := st.Orders.Transition(ctx, o.id, order.Paid, at); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Orders.Transition(ctx, o.id, order.Shipped, at.Add(time.Millisecond)); err != nil {
				t.Fatal(err)
			}
		case 1:
			if _, err := st.Orders.Transition(ctx, o.id, order.Cancelled, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, p := range products {
		if _, err := st.Products.UpdateProduct(ctx, p.ID, func(p *catalog.Product) error {
			p.Price += money.Amount(7 * (i + 1))
			p.UpdatedAt = now.Add(2 * time.Hour)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	total, err := st.Outbox.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Run, kill, restart until the projector has nothing left.
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A kill after 5, 10, 20, ... writes: each run gets further than the last, so the
	// projector converges although most runs die before their first checkpoint.
	k := &killSwitch{}
	restarts := 0
	for ; restarts < 30; restarts++ {
		runCtx, cancel := context.WithCancel(ctx)
		k.cancel, k.at = cancel, 5<<restarts
		k.run.Store(0)
		p := outbox.NewProjector(st.Outbox, projection.Consumer, quiet)
		projection.Register(p, projection.Targets{Carts: st.Carts, History: killHistory{st.History, k}, Catalog: killSink{st.CatalogSink, k}})
		func() {
			defer func() { _ = recover() }()
			_, _ = p.Drain(runCtx)
		}()
		cancel()
		lag, err := p.Lag(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if lag == 0 {
			break
		}
	}
	if k.kills.Load() < 3 {
		t.Fatalf("the projector was killed %d times; the test needs several kills to mean anything", k.kills.Load())
	}
	t.Logf("%d outbox messages applied through %d kills and restarts (%d writes incl. replays)", total, k.kills.Load(), k.calls.Load())

	// History: every order of every user exactly once, in its final status, newest first.
	byUser := map[string][]string{}
	for _, o := range orders {
		byUser[o.user] = append(byUser[o.user], o.id)
	}
	for user, ids := range byUser {
		var got []history.Entry
		req := paging.Request{Limit: 4}
		for {
			page, err := st.History.ListHistory(ctx, user, req)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.Items...)
			if page.Next == "" {
				break
			}
			req.Cursor = page.Next
		}
		if len(got) != len(ids) {
			t.Errorf("user %s: history holds %d entries, want %d", user, len(got), len(ids))
		}
		seen := map[string]bool{}
		for i, e := range got {
			if seen[e.OrderID] {
				t.Errorf("order %s listed twice", e.OrderID)
			}
			seen[e.OrderID] = true
			if i > 0 && e.PlacedAt.After(got[i-1].PlacedAt) {
				t.Errorf("user %s: entry %d newer than entry %d", user, i, i-1)
			}
			want, err := st.Orders.GetOrder(ctx, e.OrderID)
			if err != nil {
				t.Fatal(err)
			}
			if e.Status != want.Status || e.Total != want.Total || !e.UpdatedAt.Equal(want.UpdatedAt.Truncate(time.Millisecond)) {
				t.Errorf("order %s: history says %s %s at %v, store says %s %s at %v", e.OrderID, e.Status, e.Total, e.UpdatedAt, want.Status, want.Total, want.UpdatedAt)
			}
		}
		for _, id := range ids {
			if !seen[id] {
				t.Errorf("order %s missing from the history (a gap)", id)
			}
		}
		if _, err := st.Carts.ActiveCart(ctx, cart.User(user), now); !errors.Is(err, cart.ErrNotFound) {
			t.Errorf("user %s: cart %s still active after its order was projected: %v", user, firstCarts[user], err)
		}
	}
	// Catalog: every product once, at its final price, in price order.
	page, err := st.Catalog.SearchProducts(ctx, catalog.Search{Category: cat, Page: paging.Request{Limit: 100}})
	if err != nil || len(page.Items) != len(products) {
		t.Fatalf("catalog search: %d products, %v; want %d", len(page.Items), err, len(products))
	}
	for i, p := range page.Items {
		want, _ := st.Products.GetProduct(ctx, p.ID)
		if p.Price != want.Price || (i > 0 && p.Price < page.Items[i-1].Price) {
			t.Errorf("read model %s at %s, store at %s", p.ID, p.Price, want.Price)
		}
	}
}

// measured is the type of the repository placement's measuring wrapper holds (the repository
// itself when it is not wrapped).
func measured(repo any) reflect.Type {
	v := reflect.ValueOf(repo)
	if v.Kind() == reflect.Struct {
		if next := v.FieldByName("next"); next.IsValid() && next.Kind() == reflect.Interface && !next.IsNil() {
			return next.Elem().Type()
		}
	}
	return v.Type()
}
