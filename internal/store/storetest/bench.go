package storetest

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// PairOp is one operation of a benchmark pair; k is the key it works on.
type PairOp func(ctx context.Context, k int64) error

// pairWarmup is where warm-up indices start: far above any timed index, so warming up never
// pre-creates a key a timed operation will use.
const pairWarmup = int64(1) << 35

// BenchPair runs b.N operations from parallelism×GOMAXPROCS goroutines, alternating repo (the
// repository) and raw (the same statements through the driver), and reports each side's ops/s
// and p99 and the overhead ratio repo/raw: the interleaved-pairs method docs/benchmarks.md
// describes. key maps a side (0 repo, 1 raw) and an operation index to the key that side uses,
// so a backend decides whether the two sides may share keys.
func BenchPair(b *testing.B, parallelism int, repo, raw PairOp, key func(side int, i int64) int64) {
	b.Helper()
	ctx := context.Background()
	ops := [2]PairOp{repo, raw}
	// Warm-up: connections, prepared statements and server caches hot before anything is timed.
	for i := pairWarmup; i < pairWarmup+64; i++ {
		for side, op := range ops {
			if err := op(ctx, key(side, i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	var (
		n       atomic.Int64
		workers atomic.Int64
		mu      sync.Mutex
		lats    [2][]time.Duration
	)
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		workers.Add(1)
		var local [2][]time.Duration
		for pb.Next() {
			i := n.Add(1)
			side := int(i % 2)
			t0 := time.Now()
			if err := ops[side](ctx, key(side, i/2)); err != nil {
				b.Error(err)
				return
			}
			local[side] = append(local[side], time.Since(t0))
		}
		mu.Lock()
		lats[0] = append(lats[0], local[0]...)
		lats[1] = append(lats[1], local[1]...)
		mu.Unlock()
	})
	b.StopTimer()
	if len(lats[0]) == 0 || len(lats[1]) == 0 {
		return
	}
	w := float64(workers.Load())
	var mean [2]float64
	for side, name := range []string{"repo", "raw"} {
		l := lats[side]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		var sum time.Duration
		for _, d := range l {
			sum += d
		}
		mean[side] = sum.Seconds() / float64(len(l))
		b.ReportMetric(w/mean[side], name+"-ops/s")
		b.ReportMetric(float64(l[(len(l)*99)/100].Microseconds())/1000, name+"-p99-ms")
	}
	b.ReportMetric(mean[0]/mean[1], "overhead")
}
