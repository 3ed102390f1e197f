// Package storetest is THE contract suite: every backend calls these functions from its own
// _test.go with its repositories. A factory may return a shared repository: every case uses
// fresh random identifiers, so the suite never needs an empty store and cases may run in parallel.
package storetest

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"
)

// uid returns a short random identifier with a readable prefix.
func uid(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// slug returns a random lower-case slug (categories, zones).
func slug(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// base is the suite's "now": real time, because Cassandra TTLs count in real time, truncated to
// milliseconds because Cassandra and MongoDB store timestamps at that precision.
var base = time.Now().UTC().Truncate(time.Millisecond)

// never is the expiry of a cart that does not expire (a user's).
var never time.Time

// purgeWithin bounds the wait for an expired row to be purged: a store that purges by
// expires_at needs nothing past the expiry, Cassandra's whole-second TTLs up to a second more;
// the rest is headroom for a loaded machine.
const purgeWithin = 15 * time.Second

func sameInstant(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}
