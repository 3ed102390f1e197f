package storetest

import (
	"context"
	"runtime"
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

// BenchVersus runs b.N operations in alternating blocks, one side at a time (side 0, then 1,
// and so on, 8 blocks a side), each block from parallelism×GOMAXPROCS goroutines, and reports
// each side's ops/s (its operations over its blocks' wall time), p99, and the speedup of side 0
// over side 1. Unlike BenchPair it never runs the two sides at once: for operations that run
// in this process and use the CPU (a cache against the store under it), interleaving would
// charge each side the other's CPU time.
func BenchVersus(b *testing.B, parallelism int, names [2]string, ops [2]PairOp) {
	b.Helper()
	ctx := context.Background()
	for i := pairWarmup; i < pairWarmup+64; i++ {
		for _, op := range ops {
			if err := op(ctx, i); err != nil {
				b.Fatal(err)
			}
		}
	}
	const blocks = 16
	workers := parallelism * runtime.GOMAXPROCS(0)
	var (
		n     atomic.Int64
		wall  [2]time.Duration
		done  [2]int64
		lats  [2][]time.Duration
		mu    sync.Mutex
		total = int64(b.N)
	)
	b.ResetTimer()
	for blk := 0; blk < blocks; blk++ {
		side := blk % 2
		end := total * int64(blk+1) / blocks
		start := time.Now()
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var local []time.Duration
				for {
					i := n.Add(1)
					if i > end {
						break
					}
					t0 := time.Now()
					if err := ops[side](ctx, i); err != nil {
						b.Error(err)
						break
					}
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				lats[side] = append(lats[side], local...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		n.Store(end)
		wall[side] += time.Since(start)
		done[side] = int64(len(lats[side]))
	}
	b.StopTimer()
	if done[0] == 0 || done[1] == 0 {
		return
	}
	var rate [2]float64
	for side, name := range names {
		l := lats[side]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		rate[side] = float64(done[side]) / wall[side].Seconds()
		b.ReportMetric(rate[side], name+"-ops/s")
		b.ReportMetric(float64(l[(len(l)*99)/100].Microseconds())/1000, name+"-p99-ms")
	}
	b.ReportMetric(rate[0]/rate[1], "speedup")
}
