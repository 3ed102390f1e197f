// Package ratelimit holds per-key token buckets (golang.org/x/time/rate) with bounded memory:
// one bucket per client, account or session, dropped once it has been idle long enough to be
// full again, and never more than a fixed number of keys (least recently seen dropped first).
// Keyed counts in one process; shared.go holds the same limit as one stored time per key
// (GCRA), which a store several processes share updates atomically (mongostore's rate limits).
package ratelimit

import (
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"
)

// Limit is a sustained rate with a burst. The zero Limit allows everything.
type Limit struct {
	PerMinute float64 // sustained rate
	Burst     int     // bucket size: requests allowed at once after idling
}

// Off reports whether the limit allows everything.
func (l Limit) Off() bool { return l.PerMinute <= 0 || l.Burst <= 0 }

// DefaultMaxKeys bounds the buckets one limiter holds (about 30 MB with session-id keys). A
// flood of new keys past it makes the least recently seen key start over with a full bucket:
// more lenient for that key, never more memory.
const DefaultMaxKeys = 100_000

// Keyed limits each key separately.
type Keyed struct {
	limit Limit
	now   func() time.Time

	mu sync.Mutex
	// buckets in order of last use, so the idle ones are always at the oldest end.
	buckets *simplelru.LRU[string, *bucket]
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

// New returns a keyed limiter holding at most maxKeys buckets (0: DefaultMaxKeys); now is the
// clock (nil: time.Now).
func New(l Limit, maxKeys int, now func() time.Time) *Keyed {
	if now == nil {
		now = time.Now
	}
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	buckets, err := simplelru.NewLRU[string, *bucket](maxKeys, nil)
	if err != nil { // only for a size below 1, excluded above
		panic(err)
	}
	return &Keyed{limit: l, now: now, buckets: buckets}
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
	k.dropIdle(now)
	b, found := k.buckets.Get(key)
	if !found {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(k.limit.PerMinute/60), k.limit.Burst)}
		k.buckets.Add(key, b) // drops the least recently seen key when full
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

// dropIdle drops the buckets idle for a whole refill: they sit at the oldest end, so this
// costs one look when there are none.
func (k *Keyed) dropIdle(now time.Time) {
	idle := k.refill()
	for {
		_, b, ok := k.buckets.GetOldest()
		if !ok || now.Sub(b.last) < idle {
			return
		}
		k.buckets.RemoveOldest()
	}
}

// Len is the number of keys held (for tests and metrics).
func (k *Keyed) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.buckets.Len()
}

// ClientKey is the key that counts as one client for an address: an IPv4 address itself, an
// IPv6 address's /64 (a host or a LAN usually holds a whole /64, so keying by address would
// let one client take a fresh bucket per request). An unparsable address is its own key.
func ClientKey(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return addr
	}
	return p.String()
}
