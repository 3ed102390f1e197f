// Package ratelimit holds per-key token buckets (golang.org/x/time/rate) with bounded memory:
// one bucket per client, account or session, dropped once it has been idle long enough to be
// full again. The limits are per process; several API processes each enforce their own.
package ratelimit

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limit is a sustained rate with a burst. The zero Limit allows everything.
type Limit struct {
	PerMinute float64 // sustained rate
	Burst     int     // bucket size: requests allowed at once after idling
}

// Off reports whether the limit allows everything.
func (l Limit) Off() bool { return l.PerMinute <= 0 || l.Burst <= 0 }

// Keyed limits each key separately.
type Keyed struct {
	limit Limit
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

// New returns a keyed limiter; now is the clock (nil: time.Now).
func New(l Limit, now func() time.Time) *Keyed {
	if now == nil {
		now = time.Now
	}
	return &Keyed{limit: l, now: now, buckets: map[string]*bucket{}}
}

// Allow takes n tokens from key's bucket. When it cannot, it takes nothing and says how long
// until it could (for Retry-After).
func (k *Keyed) Allow(key string, n int) (ok bool, retryAfter time.Duration) {
	if k == nil || k.limit.Off() {
		return true, 0
	}
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sweep(now)
	b := k.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(k.limit.PerMinute/60), k.limit.Burst)}
		k.buckets[key] = b
	}
	b.last = now
	if n > k.limit.Burst {
		// More than a full bucket can never be granted; wait for a full one and refuse anyway.
		return false, k.refill()
	}
	r := b.lim.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// refill is how long an empty bucket takes to fill: after that idle time a bucket is the same
// as a new one, so it can be dropped.
func (k *Keyed) refill() time.Duration {
	return time.Duration(math.Ceil(float64(k.limit.Burst) / (k.limit.PerMinute / 60) * float64(time.Second)))
}

// sweep drops idle buckets, at most once per refill period, so memory follows the number of
// keys active in the last period, not every key ever seen.
func (k *Keyed) sweep(now time.Time) {
	idle := k.refill()
	if now.Sub(k.swept) < idle {
		return
	}
	k.swept = now
	for key, b := range k.buckets {
		if now.Sub(b.last) >= idle {
			delete(k.buckets, key)
		}
	}
}

// Len is the number of keys held (for tests and metrics).
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.buckets)
}
