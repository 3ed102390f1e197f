package ratelimit

import (
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestBurstThenRefusedWithRetryAfterThenRefilled(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	k := New(Limit{PerMinute: 60, Burst: 3}, c.now) // one token a second
	for i := 0; i < 3; i++ {
		if ok, _ := k.Allow("a", 1); !ok {
			t.Fatalf("request %d within the burst refused", i+1)
		}
	}
	ok, wait := k.Allow("a", 1)
	if ok || wait <= 0 || wait > time.Second {
		t.Fatalf("past the burst: ok=%v wait=%v, want refused with a wait of at most 1s", ok, wait)
	}
	if ok, _ := k.Allow("b", 1); !ok {
		t.Error("another key was limited by a's requests")
	}
	c.t = c.t.Add(wait)
	if ok, _ := k.Allow("a", 1); !ok {
		t.Error("still refused after the announced wait")
	}
}

func TestRefusalTakesNothing(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	k := New(Limit{PerMinute: 60, Burst: 1}, c.now)
	k.Allow("a", 1)
	for i := 0; i < 5; i++ { // hammering while refused must not push the wait further out
		k.Allow("a", 1)
	}
	c.t = c.t.Add(time.Second)
	if ok, _ := k.Allow("a", 1); !ok {
		t.Error("refused requests consumed tokens")
	}
}

func TestIdleKeysAreDropped(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	k := New(Limit{PerMinute: 60, Burst: 2}, c.now) // refills in 2s
	for _, key := range []string{"a", "b", "c"} {
		k.Allow(key, 1)
	}
	c.t = c.t.Add(3 * time.Second)
	k.Allow("d", 1)
	if n := k.Len(); n != 1 {
		t.Errorf("%d keys held after the others idled past a refill, want 1", n)
	}
}

func TestZeroLimitAllowsEverything(t *testing.T) {
	k := New(Limit{}, nil)
	for i := 0; i < 1000; i++ {
		if ok, _ := k.Allow("a", 1); !ok {
			t.Fatal("an unset limit refused a request")
		}
	}
	if k.Len() != 0 {
		t.Error("an unset limit kept state")
	}
}

func TestMoreThanABurstIsRefused(t *testing.T) {
	k := New(Limit{PerMinute: 60, Burst: 2}, nil)
	if ok, wait := k.Allow("a", 3); ok || wait <= 0 {
		t.Errorf("3 tokens from a bucket of 2: ok=%v wait=%v", ok, wait)
	}
}
