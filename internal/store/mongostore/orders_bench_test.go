package mongostore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
)

// BenchmarkPlaceOrders places orders of 3 items (from 500 products, so stock documents rarely
// conflict) from 16 concurrent callers on the test replica set, w: majority. What it measures
// beyond the single-caller cost is contention between order transactions (the outbox).
//
//	go test ./internal/store/mongostore -run '^$' -bench PlaceOrders -benchtime 3000x -count 3
func BenchmarkPlaceOrders(b *testing.B) {
	// partitions=1 is the outbox as it was (one counter document for every order).
	for _, parts := range []int{1, DefaultOutboxPartitions} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			s, _ := liveStoreWith(b, Options{OutboxPartitions: parts})
			benchPlaceOrders(b, s)
		})
	}
}

func benchPlaceOrders(b *testing.B, s *Store) {
	ctx := context.Background()
	const products = 500
	now := time.Now().UTC()
	refs := make([]catalog.Ref, products)
	for i := range refs {
		p := catalog.Product{ID: fmt.Sprintf("bp-%d", i), Name: "Bench", Category: fmt.Sprintf("bench-%d", i%10),
			Price: money.MustParse("9.99"), Stock: map[string]int64{"eu": 1 << 40}, CreatedAt: now, UpdatedAt: now}
		if err := s.Products().CreateProduct(ctx, p); err != nil {
			b.Fatal(err)
		}
		refs[i] = catalog.Ref{ID: p.ID, Category: p.Category}
	}
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			lines := make([]order.Line, 0, 3)
			for _, k := range rand.Perm(products)[:3] {
				lines = append(lines, order.Line{ProductID: refs[k].ID, Category: refs[k].Category, Quantity: 1})
			}
			id := fmt.Sprintf("%s-%d", run, i)
			_, _, err := s.Orders().Place(ctx, order.Placement{OrderID: "o" + id, UserID: "u" + id, CartID: "c" + id,
				CartOwner: "user:u" + id, Zone: "eu", IdempotencyKey: "k" + id, Lines: lines, At: now})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "orders/s")
}
