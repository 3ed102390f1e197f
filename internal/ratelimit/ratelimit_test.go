package ratelimit

import (
	"fmt"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestBurstThenRefusedWithRetryAfterThenRefilled(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	k := New(Limit{PerMinute: 60, Burst: 3}, 0, c.now) // one token a second
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
	k := New(Limit{PerMinute: 60, Burst: 1}, 0, c.now)
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
	k := New(Limit{PerMinute: 60, Burst: 2}, 0, c.now) // refills in 2s
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
	k := New(Limit{}, 0, nil)
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
	k := New(Limit{PerMinute: 60, Burst: 2}, 0, nil)
	if ok, wait := k.Allow("a", 3); ok || wait <= 0 {
		t.Errorf("3 tokens from a bucket of 2: ok=%v wait=%v", ok, wait)
	}
}

// Memory stays bounded under a flood of new keys within one refill period: the least recently
// seen key goes first, and a key in use survives.
func TestKeysAreCapped(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	k := New(Limit{PerMinute: 1, Burst: 1}, 3, c.now) // nothing idles within this test
	k.Allow("victim", 1)
	k.Allow("old", 1)
	for i := 0; i < 10; i++ {
		k.Allow("victim", 1) // in use: stays the most recently seen
		k.Allow(fmt.Sprintf("flood-%d", i), 1)
	}
	if n := k.Len(); n != 3 {
		t.Errorf("%d keys held, want the cap of 3", n)
	}
	if ok, _ := k.Allow("victim", 1); ok {
		t.Error("the key in use was dropped by the flood: its spent bucket came back full")
	}
	if ok, _ := k.Allow("old", 1); !ok {
		t.Error("the least recently seen key was kept past the cap")
	}
}

func TestClientKey(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"192.0.2.1", "192.0.2.2", false},
		{"192.0.2.1", "::ffff:192.0.2.1", true},
		{"2001:db8::1", "2001:db8::ffff:1", true},  // one /64
		{"2001:db8::1", "2001:db8:0:1::1", false},  // the next /64
		{"fe80::1%eth0", "fe80::2%eth1", true},     // zones do not split a /64
		{"not-an-address", "not-an-address", true}, // its own key
		{"not-an-address", "also-not-an-address", false},
	} {
		if got := ClientKey(c.a) == ClientKey(c.b); got != c.same {
			t.Errorf("ClientKey(%q)=%q, ClientKey(%q)=%q: same=%v, want %v", c.a, ClientKey(c.a), c.b, ClientKey(c.b), got, c.same)
		}
	}
}
