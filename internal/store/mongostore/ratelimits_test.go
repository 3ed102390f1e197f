package mongostore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/ratelimit"
)

// sameDatabase opens another client on s's database: another API process of the same shop.
func sameDatabase(t *testing.T, s *Store) *Store {
	t.Helper()
	other, err := Open(context.Background(), Options{URI: testURI, Database: s.db.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return other
}

// TestSharedRateLimitCountsAcrossProcesses: three clients (three processes) hammering one key
// at the same instant get exactly the burst between them, not three bursts, and each refusal
// says when the next request passes.
func TestSharedRateLimitCountsAcrossProcesses(t *testing.T) {
	s, _ := liveStore(t)
	procs := []*RateLimits{s.RateLimits(), sameDatabase(t, s).RateLimits(), sameDatabase(t, s).RateLimits()}
	l := ratelimit.Limit{PerMinute: 20, Burst: 10}
	now := time.UnixMilli(time.Now().UnixMilli())
	var (
		mu      sync.Mutex
		allowed int
		retries = map[time.Duration]int{}
		wg      sync.WaitGroup
	)
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, retry, err := procs[i%3].Allow(context.Background(), "login-account", l, "ann@example.com", now)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if ok {
				allowed++
			} else {
				retries[retry]++
			}
		}()
	}
	wg.Wait()
	if allowed != l.Burst {
		t.Errorf("allowed %d of 60 through three processes, want the burst of %d", allowed, l.Burst)
	}
	if retries[l.Interval()] != 60-l.Burst {
		t.Errorf("refusals by Retry-After: %v, want all %d at one interval (%s)", retries, 60-l.Burst, l.Interval())
	}
	// Another key and another limit name are counted apart.
	if ok, _, err := procs[1].Allow(context.Background(), "login-account", l, "bob@example.com", now); err != nil || !ok {
		t.Errorf("another key: %v %v, want allowed", ok, err)
	}
	if ok, _, err := procs[2].Allow(context.Background(), "login-client", l, "ann@example.com", now); err != nil || !ok {
		t.Errorf("another limit: %v %v, want allowed", ok, err)
	}
}

// TestSharedRateLimitIsTheGCRA: over random arrivals the store decides exactly as
// ratelimit.Limit.Decide does in memory (same answers, same Retry-After), refilling with time.
func TestSharedRateLimitIsTheGCRA(t *testing.T) {
	s, _ := liveStore(t)
	rl := s.RateLimits()
	l := ratelimit.Limit{PerMinute: 30, Burst: 4} // 2 s per request
	rng := rand.New(rand.NewPCG(3, 4))
	now := time.UnixMilli(time.Now().UnixMilli())
	var tat time.Time
	refused := 0
	for i := range 200 {
		now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
		next, want, wantRetry := l.Decide(tat, now)
		got, retry, err := rl.Allow(context.Background(), "events", l, "s1", now)
		if err != nil {
			t.Fatal(err)
		}
		if got != want || retry != wantRetry {
			t.Fatalf("request %d at +%s: store says %v (retry %s), Decide %v (retry %s)", i, now.Sub(time.Time{}), got, retry, want, wantRetry)
		}
		if !got {
			refused++
		}
		tat = next
	}
	if refused == 0 || refused == 200 {
		t.Errorf("%d of 200 refused: the arrivals must both exceed and respect the limit", refused)
	}
}

// BenchmarkRateLimit is the cost of one rate-limited request's check: the in-process token
// bucket against the shared counter on the real replica set (one findAndModify, w: majority),
// in the same run; parallel, as requests arrive.
func BenchmarkRateLimit(b *testing.B) {
	l := ratelimit.Limit{PerMinute: 1e9, Burst: 1 << 30} // never refuses: the cost of a pass
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("198.51.100.%d", i)
	}
	b.Run("in-memory", func(b *testing.B) {
		k := ratelimit.New(l, 0, nil)
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if ok, _ := k.Allow(keys[n.Add(1)%int64(len(keys))], 1); !ok {
					b.Error("refused")
				}
			}
		})
	})
	b.Run("mongo-shared", func(b *testing.B) {
		s, _ := liveStore(b)
		rl := s.RateLimits()
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ok, _, err := rl.Allow(context.Background(), "login-client", l, keys[n.Add(1)%int64(len(keys))], time.Now())
				if err != nil || !ok {
					b.Errorf("%v %v", ok, err)
				}
			}
		})
	})
}
