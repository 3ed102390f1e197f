package cassandra

import (
	"context"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/session"
)

// The benchmarks compare each repository operation with the same CQL statements issued raw
// through the driver (same consistency, same prepared statements, no mapping, no domain
// logic), so "repo/raw" is what the repository layer costs. Each reports ops/s and the p99
// latency of one operation under 16 concurrent callers. Numbers: docs/benchmarks.md.
//
//	go test ./internal/store/cassandra -run '^$' -bench . -benchtime 3s

const benchParallelism = 8 // x GOMAXPROCS goroutines

// runOps runs op b.N times from parallel goroutines and reports throughput and p99.
func runOps(b *testing.B, op func(ctx context.Context, i int64) error) {
	b.Helper()
	ctx := context.Background()
	var (
		n    atomic.Int64
		mu   sync.Mutex
		lats []time.Duration
	)
	// Warm up: statements prepared, connections and caches hot, before anything is timed.
	for i := int64(0); i < 64; i++ {
		if err := op(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		local := make([]time.Duration, 0, 1024)
		for pb.Next() {
			i := n.Add(1)
			t0 := time.Now()
			if err := op(ctx, i); err != nil {
				b.Error(err)
				return
			}
			local = append(local, time.Since(t0))
		}
		mu.Lock()
		lats = append(lats, local...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(lats) == 0 {
		return
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	p99 := lats[(len(lats)*99)/100]
	b.ReportMetric(float64(len(lats))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
}

func BenchmarkCarts(b *testing.B) {
	st := store(b)
	s := st.Session()
	r := st.Carts()
	ctx := context.Background()
	now := time.Now().UTC()
	// A pool of user carts, each with 5 lines, so reads and writes hit existing carts.
	const owners = 256
	users := make([]cart.Owner, owners)
	ids := make([]gocql.UUID, owners)
	for i := range users {
		users[i] = cart.User(fmt.Sprintf("bench-%d-%d", now.UnixNano(), i))
		var c cart.Cart
		var err error
		for j := 0; j < 5; j++ {
			c, err = r.PutItem(ctx, users[i], cart.Item{ProductID: fmt.Sprintf("p%d", j), Category: "c", Quantity: 1, AddedAt: now}, time.Time{}, now)
			if err != nil {
				b.Fatal(err)
			}
		}
		ids[i], _ = gocql.ParseUUID(c.ID)
	}
	t := userCarts.stmts
	b.Run("put/repo", func(b *testing.B) {
		runOps(b, func(ctx context.Context, i int64) error {
			_, err := r.PutItem(ctx, users[i%owners], cart.Item{ProductID: fmt.Sprintf("p%d", i%8), Category: "c", Quantity: i%9 + 1, AddedAt: now}, time.Time{}, now)
			return err
		})
	})
	b.Run("put/raw", func(b *testing.B) {
		runOps(b, func(ctx context.Context, i int64) error {
			u := users[i%owners].UserID
			iter := s.Query(t.read, u).WithContext(ctx).Consistency(CartsConsistency).Idempotent(true).Iter()
			for iter.Scan(new(gocql.UUID), new(gocql.UUID), new(string), new(string), new(string), new(time.Time), new(time.Time), new(time.Time),
				new([]string), new(*int), new(string), new(int64), new(time.Time)) {
			}
			if err := iter.Close(); err != nil {
				return err
			}
			bt := s.Batch(gocql.UnloggedBatch).WithContext(ctx).Consistency(CartsConsistency)
			bt.Entries = append(bt.Entries,
				gocql.BatchEntry{Stmt: t.putNew, Args: []any{0, "c", i%9 + 1, now, u, ids[i%owners], fmt.Sprintf("p%d", i%8)}, Idempotent: true},
				gocql.BatchEntry{Stmt: t.touch, Args: []any{0, now, u, ids[i%owners]}, Idempotent: true})
			return bt.Exec()
		})
	})
	b.Run("get/repo", func(b *testing.B) {
		runOps(b, func(ctx context.Context, i int64) error {
			_, err := r.ActiveCart(ctx, users[i%owners], now)
			return err
		})
	})
	b.Run("get/raw", func(b *testing.B) {
		runOps(b, func(ctx context.Context, i int64) error {
			iter := s.Query(t.read, users[i%owners].UserID).WithContext(ctx).Consistency(CartsConsistency).Idempotent(true).Iter()
			for iter.Scan(new(gocql.UUID), new(gocql.UUID), new(string), new(string), new(string), new(time.Time), new(time.Time), new(time.Time),
				new([]string), new(*int), new(string), new(int64), new(time.Time)) {
			}
			return iter.Close()
		})
	})
}

func BenchmarkSessions(b *testing.B) {
	st := store(b)
	s := st.Session()
	r := st.Sessions()
	now := time.Now().UTC()
	prefix := fmt.Sprintf("bench-%d-", now.UnixNano())
	mk := func(i int64) session.Session {
		return session.Session{ID: fmt.Sprintf("%s%d", prefix, i), CreatedAt: now, LastActive: now, ExpiresAt: now.Add(time.Hour),
			IP: "203.0.113.7", UserAgent: "bench/1.0", Status: session.StatusActive, Data: map[string]string{"locale": "ru"}}
	}
	b.Run("create/repo", func(b *testing.B) {
		runOps(b, func(ctx context.Context, i int64) error {
			return r.CreateSession(ctx, mk(i))
		})
	})
	b.Run("create/raw", func(b *testing.B) {
		runOps(b, func(ctx context.Context, i int64) error {
			x := mk(-i)
			return s.Query(sessionInsert, x.ID, nil, x.CreatedAt, x.LastActive, x.ExpiresAt, x.IP, x.UserAgent, string(x.Status), x.Data, 3600).
				WithContext(ctx).Consistency(SessionsConsistency).Idempotent(true).Exec()
		})
	})
	const n = 1000 // sessions to read, written once up front
	for i := int64(1); i <= n; i++ {
		if err := r.CreateSession(context.Background(), mk(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("get/repo", func(b *testing.B) {
		runOps(b, func(ctx context.Context, i int64) error {
			_, err := r.GetSession(ctx, fmt.Sprintf("%s%d", prefix, 1+i%n), now)
			return err
		})
	})
	b.Run("get/raw", func(b *testing.B) {
		runOps(b, func(ctx context.Context, i int64) error {
			var x session.Session
			var user, status *string
			var ip net.IP
			return s.Query(sessionSelect, fmt.Sprintf("%s%d", prefix, 1+i%n)).WithContext(ctx).Consistency(SessionsConsistency).Idempotent(true).
				Scan(&x.ID, &user, &x.CreatedAt, &x.LastActive, &x.ExpiresAt, &ip, &x.UserAgent, &status, &x.Data)
		})
	})
}

func BenchmarkEvents(b *testing.B) {
	st := store(b)
	s := st.Session()
	r := st.Events()
	day := event.Day(time.Now())
	prefix := fmt.Sprintf("u:bench-%d-", time.Now().UnixNano())
	const actors = 64
	b.Run("append/repo", func(b *testing.B) {
		runOps(b, func(ctx context.Context, i int64) error {
			return r.AppendEvent(ctx, event.Event{ID: fmt.Sprintf("e%d", i), Actor: fmt.Sprintf("%s%d", prefix, i%actors), Type: event.View,
				At: day.Add(time.Duration(i) * time.Millisecond), ProductID: "p1", Details: map[string]string{"src": "bench"}})
		})
	})
	b.Run("append/raw", func(b *testing.B) {
		runOps(b, func(ctx context.Context, i int64) error {
			return s.Query(eventInsert, fmt.Sprintf("%s%d", prefix, i%actors), day, day.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("r%d", i),
				"view", "p1", map[string]string{"src": "bench"}).WithContext(ctx).Consistency(EventsConsistency).Idempotent(true).Exec()
		})
	})
	b.Run("list20/repo", func(b *testing.B) {
		runOps(b, func(ctx context.Context, i int64) error {
			_, err := r.ListEvents(ctx, event.Query{Actor: fmt.Sprintf("%s%d", prefix, i%actors), Day: day, Page: paging.Request{Limit: 20}})
			return err
		})
	})
	b.Run("list20/raw", func(b *testing.B) {
		runOps(b, func(ctx context.Context, i int64) error {
			iter := s.Query(eventList, fmt.Sprintf("%s%d", prefix, i%actors), day).WithContext(ctx).Consistency(EventsConsistency).
				Idempotent(true).PageSize(20).PageState(nil).Iter()
			var e event.Event
			var typ string
			for iter.Scan(&e.Actor, &e.At, &e.ID, &typ, &e.ProductID, &e.Details) {
			}
			_ = iter.PageState()
			return iter.Close()
		})
	})
}
