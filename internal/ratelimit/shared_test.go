package ratelimit

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestDecideIsTheTokenBucket: the shared form (GCRA over one stored time) allows and refuses
// exactly as the in-process token bucket does, with the same Retry-After, over random arrivals.
func TestDecideIsTheTokenBucket(t *testing.T) {
	for _, l := range []Limit{{PerMinute: 30, Burst: 4}, {PerMinute: 600, Burst: 300}, {PerMinute: 10, Burst: 1}} {
		now := time.Unix(1_000_000, 0)
		keyed := New(l, 0, func() time.Time { return now })
		rng := rand.New(rand.NewPCG(1, uint64(l.Burst)))
		var tat time.Time
		refused := 0
		for i := range 2000 {
			now = now.Add(time.Duration(rng.IntN(int(2*l.Interval()/time.Millisecond))) * time.Millisecond / time.Duration(1+rng.IntN(l.Burst)))
			next, ok, retry := l.Decide(tat, now)
			wantOK, wantRetry := keyed.Allow("k", 1)
			if ok != wantOK || (!ok && (retry-wantRetry).Abs() > time.Millisecond) {
				t.Fatalf("%+v request %d: Decide %v (retry %s), token bucket %v (retry %s)", l, i, ok, retry, wantOK, wantRetry)
			}
			if !ok {
				refused++
			}
			tat = next
		}
		if refused == 0 || refused == 2000 {
			t.Errorf("%+v: %d of 2000 refused; the arrivals must both exceed and respect the limit", l, refused)
		}
	}
	if _, ok, _ := (Limit{}).Decide(time.Time{}, time.Now()); !ok {
		t.Error("the zero limit refused a request")
	}
}
