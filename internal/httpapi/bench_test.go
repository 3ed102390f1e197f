package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/session"
)

// benchParallelism: goroutines per GOMAXPROCS. HTTP clients mostly wait, so a few per core keep
// the server busy; 8 x 2 cores = 16 concurrent clients.
const benchParallelism = 8

// run times op through b.RunParallel (op gets a unique index 0..b.N-1) and reports throughput
// and the p50/p99 latency of single requests.
func run(b *testing.B, unit string, op func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	b.ReportAllocs()
	b.SetParallelism(benchParallelism)
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		local := make([]time.Duration, 0, 1024)
		for pb.Next() {
			i := int(next.Add(1) - 1)
			start := time.Now()
			if err := op(i); err != nil {
				b.Error(err)
				return
			}
			local = append(local, time.Since(start))
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	b.StopTimer()
	cpu := cpuTime() - cpu0
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit+"/s")
	// Per CPU-second of this process (server AND client, both in it): on a shared machine the
	// wall-clock rate includes waiting for a core.
	b.ReportMetric(float64(b.N)/cpu.Seconds(), unit+"/cpu-s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// cpuTime is the user+system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// call sends one request and fails unless the status is want; the body is drained so the
// connection is reused.
func (e *env) call(method, path, token string, body string, header map[string]string, want int) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		return err
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	res, err := e.client.Do(r)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	return nil
}

// benchSession creates a live session straight in the store (setup, not measured); with a
// user id it is logged in.
func benchSession(b *testing.B, e *env, userID string) (token string, sess session.Session) {
	b.Helper()
	ctx := context.Background()
	token, id, err := session.NewToken()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	sess = session.Session{ID: id, UserID: userID, CreatedAt: now, LastActive: now, ExpiresAt: now.Add(session.DefaultTTL),
		Status: session.StatusActive, Data: map[string]string{}}
	if err := e.stores.Sessions.CreateSession(ctx, sess); err != nil {
		b.Fatal(err)
	}
	return token, sess
}

// benchProducts seeds n products per category with prices spread over 1.00..100.00.
func benchProducts(b *testing.B, e *env, categories, n int) {
	b.Helper()
	for c := range categories {
		for i := range n {
			e.seedProduct(b, fmt.Sprintf("c%d-p%d", c, i), fmt.Sprintf("cat-%d", c),
				money.Amount(100+(i*9901)%9900), catalog.MaxStock)
		}
	}
}

// BenchmarkHTTPPlaceOrder: POST /v1/orders for a logged-in user with 3 items in the cart.
// Users, sessions and carts are prepared before the timer starts, one per order.
func BenchmarkHTTPPlaceOrder(b *testing.B) {
	e := newEnv(b)
	benchProducts(b, e, 1, 30)
	ctx := context.Background()
	hash, err := account.HashPassword("password123")
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	tokens := make([]string, b.N)
	now := time.Now().UTC()
	for i := range b.N {
		uid := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i)
		if err := e.stores.Users.CreateUser(ctx, account.User{ID: uid, Email: uid + "@example.com", PasswordHash: hash, CreatedAt: now}); err != nil {
			b.Fatal(err)
		}
		tokens[i], _ = benchSession(b, e, uid)
		for k := range 3 {
			p := fmt.Sprintf("c0-p%d", (i+k*7)%30)
			if _, err := e.stores.Carts.PutItem(ctx, cart.User(uid), cart.Item{ProductID: p, Category: "cat-0", Quantity: 1, AddedAt: now}, time.Time{}, now); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StartTimer()
	run(b, "orders", func(i int) error {
		return e.call("POST", "/v1/orders", tokens[i], `{"zone":"eu"}`, map[string]string{IdempotencyKeyHeader: "bench"}, http.StatusCreated)
	})
}

// BenchmarkHTTPPutCartItem: PUT /v1/cart/items/{id} from 256 logged-in users, each cycling
// over its own 3 of 50 products, so carts hold 3 lines (the response prices every line).
func BenchmarkHTTPPutCartItem(b *testing.B) {
	e := newEnv(b)
	benchProducts(b, e, 1, 50)
	tokens := make([]string, 256)
	for i := range tokens {
		tokens[i], _ = benchSession(b, e, fmt.Sprintf("put-user-%d", i))
	}
	run(b, "puts", func(i int) error {
		u := i % len(tokens)
		return e.call("PUT", fmt.Sprintf("/v1/cart/items/c0-p%d", (u*3+(i/len(tokens))%3)%50), tokens[u],
			fmt.Sprintf(`{"quantity":%d}`, 1+i%9), nil, http.StatusOK)
	})
}

// BenchmarkHTTPSearch: GET /v1/products in one of 10 categories of 1,000 products, with a
// price range, 20 per page (PRD-2).
func BenchmarkHTTPSearch(b *testing.B) {
	e := newEnv(b)
	benchProducts(b, e, 10, 1000)
	run(b, "searches", func(i int) error {
		lo := 10 + i%50
		return e.call("GET", fmt.Sprintf("/v1/products?category=cat-%d&min_price=%d.00&max_price=%d.50&limit=20", i%10, lo, lo+30),
			"", "", nil, http.StatusOK)
	})
}

// BenchmarkHTTPSessionLookup: GET /v1/cart, which is the bearer-token session lookup plus
// the (empty) active-cart read, over 1,000 guest sessions.
func BenchmarkHTTPSessionLookup(b *testing.B) {
	e := newEnv(b)
	tokens := make([]string, 1000)
	for i := range tokens {
		tokens[i], _ = benchSession(b, e, "")
	}
	run(b, "lookups", func(i int) error {
		return e.call("GET", "/v1/cart", tokens[i%len(tokens)], "", nil, http.StatusOK)
	})
}
