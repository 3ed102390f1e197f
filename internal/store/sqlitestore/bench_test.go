package sqlitestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/projection"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

// latencies collects per-operation durations from parallel workers and reports p50/p99.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(ds []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, ds...)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	if len(l.all) == 0 {
		return
	}
	slices.Sort(l.all)
	q := func(p float64) float64 { return float64(l.all[int(p*float64(len(l.all)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// parallel runs op in b.RunParallel and records each call's latency.
func parallel(b *testing.B, op func(i int64) error) {
	var lat latencies
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ds := make([]time.Duration, 0, 1024)
		for pb.Next() {
			start := time.Now()
			if err := op(n.Add(1)); err != nil {
				b.Error(err)
				return
			}
			ds = append(ds, time.Since(start))
		}
		lat.add(ds)
	})
	b.StopTimer()
	lat.report(b)
}

const benchCategories = 20

// benchDB is a database with 5,000 products over 20 categories, plenty of stock.
func benchDB(b *testing.B, drv driver) (*DB, []catalog.Product) {
	b.Helper()
	db, err := open(context.Background(), b.TempDir()+"/bench.db", drv)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	var ps []catalog.Product
	for i := 0; i < 5000; i++ {
		p := catalog.Product{ID: fmt.Sprintf("p%05d", i), Name: "Bench product", Category: fmt.Sprintf("cat%02d", i%benchCategories),
			Price: money.Amount(100 + rng.IntN(100000)), Attributes: map[string]string{"color": "red", "brand": "acme"},
			Stock: map[string]int64{"eu": catalog.MaxStock, "us": 100}}
		if err := db.Products().CreateProduct(ctx, p); err != nil {
			b.Fatal(err)
		}
		ps = append(ps, p)
	}
	return db, ps
}

func forDrivers(b *testing.B, fn func(b *testing.B, drv driver)) {
	for _, drv := range []driver{mattn, modernc} {
		b.Run(drv.name, func(b *testing.B) { fn(b, drv) })
	}
}

func BenchmarkPlaceOrder3Items(b *testing.B) {
	forDrivers(b, func(b *testing.B, drv driver) {
		db, ps := benchDB(b, drv)
		ctx := context.Background()
		repo := db.Orders()
		parallel(b, func(i int64) error {
			lines := make([]order.Line, 3)
			for j := range lines {
				p := ps[(int(i)*7+j*1013)%len(ps)]
				lines[j] = order.Line{ProductID: p.ID, Category: p.Category, Quantity: 1}
			}
			_, _, err := repo.Place(ctx, order.Placement{OrderID: fmt.Sprintf("o%d", i), UserID: fmt.Sprintf("u%d", i%1000),
				CartID: fmt.Sprintf("c%d", i), Zone: "eu", IdempotencyKey: fmt.Sprintf("k%d", i), Lines: lines, At: time.Now()})
			return err
		})
	})
}

func BenchmarkPutCartItem(b *testing.B) {
	forDrivers(b, func(b *testing.B, drv driver) {
		db, ps := benchDB(b, drv)
		ctx := context.Background()
		repo := db.Carts()
		parallel(b, func(i int64) error {
			p := ps[int(i*31)%len(ps)]
			_, err := repo.PutItem(ctx, cart.User(fmt.Sprintf("u%d", i%500)),
				cart.Item{ProductID: p.ID, Category: p.Category, Quantity: 1 + i%5, AddedAt: time.Now()}, time.Time{}, time.Now())
			if err == cart.ErrTooManyItems {
				return nil
			}
			return err
		})
	})
}

func BenchmarkSearchCategoryPriceRange(b *testing.B) {
	forDrivers(b, func(b *testing.B, drv driver) {
		db, _ := benchDB(b, drv)
		ctx := context.Background()
		repo := db.Products()
		parallel(b, func(i int64) error {
			page, err := repo.SearchProducts(ctx, catalog.Search{Category: fmt.Sprintf("cat%02d", i%benchCategories),
				MinPrice: money.MustParse("100.00"), MaxPrice: money.MustParse("600.00"), Page: paging.Request{Limit: 20}})
			if err == nil && len(page.Items) == 0 {
				err = fmt.Errorf("empty page")
			}
			return err
		})
	})
}

func BenchmarkSessionLookup(b *testing.B) {
	forDrivers(b, func(b *testing.B, drv driver) {
		db, _ := benchDB(b, drv)
		ctx := context.Background()
		repo := db.Sessions()
		now := time.Now()
		ids := make([]string, 10000)
		for i := range ids {
			ids[i] = fmt.Sprintf("s%05d", i)
			if err := repo.CreateSession(ctx, session.Session{ID: ids[i], CreatedAt: now, LastActive: now,
				ExpiresAt: now.Add(time.Hour), Status: session.StatusActive}); err != nil {
				b.Fatal(err)
			}
		}
		parallel(b, func(i int64) error {
			_, err := repo.GetSession(ctx, ids[int(i)%len(ids)], now)
			return err
		})
	})
}

// BenchmarkSearchCardCache measures the card cache's gain: the same search as
// BenchmarkSearchCategoryPriceRange (mattn driver) through the card cache and straight from the
// store, in alternating blocks of the same run (storetest.BenchVersus), reporting the speedup.
// "writes" adds a writer changing one product's price every 5 ms with the projector draining
// after each, so the cache refetches changed cards while it serves.
func BenchmarkSearchCardCache(b *testing.B) {
	for _, writes := range []bool{false, true} {
		name := "read-only"
		if writes {
			name = "writes-200-per-s"
		}
		b.Run(name, func(b *testing.B) {
			db, ps := benchDB(b, mattn)
			ctx := context.Background()
			cache := catalog.NewCardCache(db.Products(), 0)
			proj := outbox.NewProjector(db.Outbox(), "bench-cards", nil)
			projection.RegisterCards(proj, cache)
			if _, err := proj.Drain(ctx); err != nil {
				b.Fatal(err)
			}
			if writes {
				stop := make(chan struct{})
				done := make(chan struct{})
				go func() {
					defer close(done)
					t := time.NewTicker(5 * time.Millisecond)
					defer t.Stop()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						case <-t.C:
						}
						p := ps[(i*7919)%len(ps)]
						if _, err := db.Products().UpdateProduct(ctx, p.ID, func(p *catalog.Product) error {
							p.Price = money.Amount(100 + (i*104729)%100000)
							return nil
						}); err != nil {
							b.Error(err)
							return
						}
						if _, err := proj.Drain(ctx); err != nil {
							b.Error(err)
							return
						}
					}
				}()
				b.Cleanup(func() { close(stop); <-done })
			}
			search := func(r catalog.Reader) storetest.PairOp {
				return func(ctx context.Context, i int64) error {
					page, err := r.SearchProducts(ctx, catalog.Search{Category: fmt.Sprintf("cat%02d", i%benchCategories),
						MinPrice: money.MustParse("100.00"), MaxPrice: money.MustParse("600.00"), Page: paging.Request{Limit: 20}})
					if err == nil && len(page.Items) == 0 {
						err = fmt.Errorf("empty page")
					}
					return err
				}
			}
			storetest.BenchVersus(b, 2, [2]string{"cached", "store"}, [2]storetest.PairOp{search(cache), search(db.Products())})
		})
	}
}
