package mongostore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

// BenchmarkOrdersVsSQLite places orders of 3 items on the MongoDB store (the test replica set,
// w: majority, 16 outbox partitions) and on the embedded SQLite store (default driver, a file in
// a temporary directory) in the same run: the same 5,000 products over 20 categories (as
// internal/store/sqlitestore's benchmark) created through each store's CreateProduct, the same
// placements (3 distinct random products, quantity 1, zone eu), the same 16 concurrent callers
// (8 x GOMAXPROCS). b.N orders are split in blocks that alternate between the stores
// (storetest.BenchSides: 8 blocks, 4 per store, each store alone on the machine during its
// block), so both see the same drift of a shared machine. orders/s per store (mongo-ops/s,
// sqlite-ops/s) = its orders / the wall time of its blocks.
//
//	go test ./internal/store/mongostore -run '^$' -bench 'Pairs|VsSQLite' -benchtime 4000x -count 3
func BenchmarkOrdersVsSQLite(b *testing.B) {
	ctx := context.Background()
	ms, _ := liveStore(b)
	lite, err := sqlitestore.Open(ctx, b.TempDir()+"/bench.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = lite.Close() })
	stores := [2]order.Repository{ms.Orders(), lite.Orders()}

	const products, categories = 5000, 20
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now().UTC()
	ps := make([]catalog.Product, products)
	for i := range ps {
		ps[i] = catalog.Product{ID: fmt.Sprintf("p%05d", i), Name: "Bench product", Category: fmt.Sprintf("cat%02d", i%categories),
			Price: money.Amount(100 + rng.IntN(100000)), Attributes: map[string]string{"color": "red", "brand": "acme"},
			Stock: map[string]int64{"eu": catalog.MaxStock, "us": 100}, CreatedAt: now, UpdatedAt: now}
	}
	for _, repo := range []catalog.Repository{ms.Products(), lite.Products()} {
		parallelSetup(b, products, func(i int) error { return repo.CreateProduct(ctx, ps[i]) })
	}

	b.Run("3-items", func(b *testing.B) {
		run := fmt.Sprintf("%d-", time.Now().UnixNano()) // new order ids on every run
		var seq atomic.Int64
		place := func(repo order.Repository) error {
			i := seq.Add(1)
			var k [3]int
			k[0] = rand.IntN(products)
			for k[1] = rand.IntN(products); k[1] == k[0]; k[1] = rand.IntN(products) {
			}
			for k[2] = rand.IntN(products); k[2] == k[0] || k[2] == k[1]; k[2] = rand.IntN(products) {
			}
			lines := make([]order.Line, 0, 3)
			for _, j := range k {
				lines = append(lines, order.Line{ProductID: ps[j].ID, Category: ps[j].Category, Quantity: 1})
			}
			id := run + fmt.Sprint(i)
			_, created, err := repo.Place(ctx, order.Placement{OrderID: "o" + id, UserID: fmt.Sprintf("u%d", i%1000), CartID: "c" + id,
				CartOwner: fmt.Sprintf("user:u%d", i%1000), Zone: "eu", IdempotencyKey: "k" + id, Lines: lines, At: time.Now()})
			if err == nil && !created {
				err = fmt.Errorf("order %s not created", id)
			}
			return err
		}
		ops := [2]storetest.PairOp{
			func(context.Context, int64) error { return place(stores[0]) },
			func(context.Context, int64) error { return place(stores[1]) },
		}
		rate, ok := storetest.BenchSides(b, benchParallelism*runtime.GOMAXPROCS(0), 8, [2]string{"mongo", "sqlite"}, ops,
			func(_ int, i int64) int64 { return i })
		if !ok {
			return
		}
		b.ReportMetric(rate[1]/rate[0], "sqlite/mongo")
	})
}
