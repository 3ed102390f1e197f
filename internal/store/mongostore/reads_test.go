package mongostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
)

// The outbox's positions in one query each say what asking every partition says: the last seq
// of each partition (0 for one never written) and a consumer's checkpoint in each.
func TestOutboxPositionsAgreeWithPartitions(t *testing.T) {
	s, _ := liveStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now().UTC()
	for i := range 7 {
		key := fmt.Sprintf("k%d", i%5) // some partitions get several messages, most none
		if err := s.inTxn(ctx, func(ctx context.Context) error {
			return s.appendOutbox(ctx, "t", key, []byte("{}"), now)
		}); err != nil {
			t.Fatal(err)
		}
	}
	log := s.Outbox()
	parts := outbox.Parts(log)
	if err := parts[s.outboxPartition("k1")].SaveCheckpoint(ctx, "c", 1); err != nil {
		t.Fatal(err)
	}
	pos := log.(outbox.Positions)
	last, err := pos.LastSeqs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cps, err := pos.Checkpoints(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	var wantLast, wantCP []int64
	for _, part := range parts {
		n, err := part.LastSeq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := part.Checkpoint(ctx, "c")
		if err != nil {
			t.Fatal(err)
		}
		wantLast, wantCP = append(wantLast, n), append(wantCP, cp)
	}
	if !slices.Equal(last, wantLast) || !slices.Equal(cps, wantCP) {
		t.Errorf("positions: last %v, checkpoints %v; the partitions say %v and %v", last, cps, wantLast, wantCP)
	}
	var total int64
	for _, n := range last {
		total += n
	}
	if total != 7 || cps[s.outboxPartition("k1")] != 1 {
		t.Errorf("last seqs add up to %d (want 7), checkpoint of k1's partition %d (want 1)", total, cps[s.outboxPartition("k1")])
	}
	if n, err := log.LastSeq(ctx); err != nil || n != 7 {
		t.Errorf("LastSeq of the whole outbox: %d, %v; want 7", n, err)
	}
}

// On a replica set a product is read by its _id in one command; the claim path (behind a
// mongos) reads the claim first. Both find the same product, and both say not found alike.
func TestProductReadByIDOnAReplicaSet(t *testing.T) {
	s, sharded, findsOf := liveStoreCountingFinds(t)
	if sharded != !s.unsharded {
		t.Fatalf("behind a mongos: %v, but the store says unsharded=%v", sharded, s.unsharded)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := catalog.Product{ID: "p-read-by-id", Name: "Lamp", Category: "home", Price: money.MustParse("12.50"),
		Stock: map[string]int64{"eu-west": 3}, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	if err := s.Products().CreateProduct(ctx, p); err != nil {
		t.Fatal(err)
	}
	count := func(read func() (catalog.Product, error)) (n int, got catalog.Product, err error) {
		n = findsOf(func() { got, err = read() })
		return n, got, err
	}
	wantFinds := 1
	if sharded {
		wantFinds = 2
	}
	for _, path := range []struct {
		name      string
		unsharded bool
		finds     int
	}{{"as opened", s.unsharded, wantFinds}, {"claim first", false, 2}} {
		s.unsharded = path.unsharded
		n, got, err := count(func() (catalog.Product, error) { return (*products)(s).CurrentProduct(ctx, p.ID) })
		if err != nil || got.Name != p.Name || got.Category != p.Category || got.Price != p.Price || got.Stock["eu-west"] != 3 {
			t.Errorf("%s: read %+v, %v; want %+v", path.name, got, err, p)
		}
		if n != path.finds {
			t.Errorf("%s: %d find commands, want %d", path.name, n, path.finds)
		}
		if _, _, err := count(func() (catalog.Product, error) { return s.Products().GetProduct(ctx, "no-such-product") }); err != catalog.ErrNotFound {
			t.Errorf("%s: missing product: %v, want catalog.ErrNotFound", path.name, err)
		}
	}
}

// On a replica set an order is read by its _id in one command; the claim path (behind a mongos)
// reads the order-id claim first. Both find the same order, and both say not found alike.
func TestOrderReadByIDOnAReplicaSet(t *testing.T) {
	s, sharded, findsOf := liveStoreCountingFinds(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now().UTC()
	p := catalog.Product{ID: "p-order-read", Name: "Lamp", Category: "home", Price: money.MustParse("12.50"),
		Stock: map[string]int64{"eu-west": 3}, CreatedAt: now, UpdatedAt: now}
	if err := s.Products().CreateProduct(ctx, p); err != nil {
		t.Fatal(err)
	}
	placed, created, err := s.Orders().Place(ctx, order.Placement{OrderID: "o-read-by-id", UserID: "u1", CartID: "c1",
		CartOwner: "u:u1", Zone: "eu-west", IdempotencyKey: "k1", Lines: []order.Line{{ProductID: p.ID, Category: p.Category, Quantity: 1}}, At: now})
	if err != nil || !created {
		t.Fatalf("place: created %v, %v", created, err)
	}
	count := func(id string) (n int, got order.Order, err error) {
		n = findsOf(func() { got, err = s.Orders().GetOrder(ctx, id) })
		return n, got, err
	}
	wantFinds := 1
	if sharded {
		wantFinds = 2
	}
	for _, path := range []struct {
		name      string
		unsharded bool
		finds     int
	}{{"as opened", s.unsharded, wantFinds}, {"claim first", false, 2}} {
		s.unsharded = path.unsharded
		n, got, err := count(placed.ID)
		if err != nil || got.ID != placed.ID || got.UserID != "u1" || got.Total != placed.Total || len(got.Items) != 1 {
			t.Errorf("%s: read %+v, %v; want %+v", path.name, got, err, placed)
		}
		if n != path.finds {
			t.Errorf("%s: %d find commands, want %d", path.name, n, path.finds)
		}
		if _, _, err := count("no-such-order"); !errors.Is(err, order.ErrNotFound) {
			t.Errorf("%s: missing order: %v, want order.ErrNotFound", path.name, err)
		}
	}
}

// liveStoreCountingFinds opens the live store with an observer of its find commands; findsOf
// runs read and returns how many find commands it sent.
func liveStoreCountingFinds(t *testing.T) (s *Store, sharded bool, findsOf func(read func()) int) {
	t.Helper()
	var mu sync.Mutex
	var finds int
	s, sharded = liveStoreWith(t, Options{ObserveCommand: func(command string, _ time.Duration, _ error) {
		if command == "find" {
			mu.Lock()
			finds++
			mu.Unlock()
		}
	}})
	return s, sharded, func(read func()) int {
		mu.Lock()
		finds = 0
		mu.Unlock()
		read()
		mu.Lock()
		defer mu.Unlock()
		return finds
	}
}
