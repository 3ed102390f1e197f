package cassandrastore

import (
	"slices"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// recentP99 keeps the p99 of the recent successful attempts of each statement kind (statement
// name and consistency: a SERIAL read of a cart is not a QUORUM one), for the speculative
// delay. A fixed delay is wrong somewhere: measured here, a session write's p99 is a few ms on
// an idle machine and 200 ms on one at load 50, a SERIAL cart read's above a second; below the
// real p99 most statements run twice, which loads the cluster further. Failed and cancelled
// attempts are not counted, so a frozen node does not raise the delay that works around it.
type recentP99 struct {
	mu    sync.Mutex
	kinds map[string]*latencyWindow
}

// The speculative delay is the recent p99, within these bounds, or specDefault until a kind has
// p99Samples samples.
const (
	specMin     = 10 * time.Millisecond
	specMax     = 500 * time.Millisecond
	specDefault = 100 * time.Millisecond
	p99Samples  = 200 // a ring of the last 200 attempts; the p99 is its second-largest value
	p99Every    = 50  // recomputed every 50 samples
)

type latencyWindow struct {
	ring  [p99Samples]time.Duration
	n     int // samples seen
	p99   time.Duration
	dirty int
}

func newRecentP99() *recentP99 { return &recentP99{kinds: map[string]*latencyWindow{}} }

func kindOf(stmt string, cl gocql.Consistency) string { return statementName(stmt) + "/" + cl.String() }

func (r *recentP99) observe(kind string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.kinds[kind]
	if w == nil {
		w = &latencyWindow{}
		r.kinds[kind] = w
	}
	w.ring[w.n%p99Samples] = d
	w.n++
	if w.dirty++; w.dirty >= p99Every && w.n >= p99Samples {
		s := slices.Clone(w.ring[:])
		slices.Sort(s)
		w.p99, w.dirty = s[p99Samples*99/100], 0
	}
}

// delay is the speculative delay for kind.
func (r *recentP99) delay(kind string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.kinds[kind]
	if w == nil || w.p99 == 0 {
		return specDefault
	}
	return min(max(w.p99, specMin), specMax)
}
