package cassandrastore

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// recentP99 keeps the p99 of the recent successful attempts of each statement kind (statement
// name and consistency: a SERIAL read of a cart is not a QUORUM one), for the speculative
// delay. A fixed delay is wrong somewhere: measured here, a session write's p99 is a few ms on
// an idle machine and 200 ms on one at load 50, a SERIAL cart read's above a second; below the
// real p99 most statements run twice, which loads the cluster further. Failed and cancelled
// attempts are not counted, so a frozen node does not raise the delay that works around it.
// Each kind has its own window and lock, and the delay is read without one: every statement
// asks for it, and one lock for all kinds made the statements of a busy process queue on it.
type recentP99 struct {
	kinds sync.Map // stmtKind -> *latencyWindow
}

// stmtKind is a statement kind: its name and consistency level.
type stmtKind struct {
	name string
	cl   gocql.Consistency
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
	mu    sync.Mutex
	ring  [p99Samples]time.Duration
	n     int // samples seen
	dirty int
	p99   atomic.Int64 // a time.Duration; 0 until p99Samples samples
}

func newRecentP99() *recentP99 { return &recentP99{} }

func kindOf(stmt string, cl gocql.Consistency) stmtKind { return stmtKind{statementName(stmt), cl} }

func (r *recentP99) observe(kind stmtKind, d time.Duration) {
	v, ok := r.kinds.Load(kind)
	if !ok {
		v, _ = r.kinds.LoadOrStore(kind, &latencyWindow{})
	}
	w := v.(*latencyWindow)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ring[w.n%p99Samples] = d
	w.n++
	if w.dirty++; w.dirty >= p99Every && w.n >= p99Samples {
		s := slices.Clone(w.ring[:])
		slices.Sort(s)
		w.p99.Store(int64(s[p99Samples*99/100]))
		w.dirty = 0
	}
}

// delay is the speculative delay for kind.
func (r *recentP99) delay(kind stmtKind) time.Duration {
	v, ok := r.kinds.Load(kind)
	if !ok {
		return specDefault
	}
	p99 := time.Duration(v.(*latencyWindow).p99.Load())
	if p99 == 0 {
		return specDefault
	}
	return min(max(p99, specMin), specMax)
}
