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
// repository) and raw (the same statements through the driver), and reports each side's ops/s,
// p50 and p99 and the overhead ratio repo/raw of the mean latencies: the interleaved-pairs
// method docs/evidence/benchmarks.md describes. key maps a side (0 repo, 1 raw) and an operation index to the key that side uses,
// so a backend decides whether the two sides may share keys.
func BenchPair(b *testing.B, parallelism int, repo, raw PairOp, key func(side int, i int64) int64) {
	b.Helper()
	ctx := context.Background()
	ops := [2]PairOp{repo, raw}
	warmUp(b, ops, key)
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
		b.ReportMetric(float64(l[len(l)/2].Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(l[(len(l)*99)/100].Microseconds())/1000, name+"-p99-ms")
	}
	b.ReportMetric(mean[0]/mean[1], "overhead")
}

// BenchBlocks measures repo against raw like BenchPair, but alternates them in blocks instead
// of per operation: each of the blocks (an even number, repo first) runs its side alone from
// workers goroutines, and a side's ops/s is its operations over its blocks' wall time. For
// in-process work behind a FIFO queue (SQLite's single writer, a connection pool, two cores),
// per-operation interleaving puts the other side's service time into every latency and pulls
// the overhead towards 1; blocks keep each side's throughput its own, while alternating them
// still spreads a shared machine's drift over both. Reported: repo-ops/s, raw-ops/s,
// repo-p99-ms, raw-p99-ms, overhead = raw ops/s / repo ops/s (repo cost per op / raw cost).
func BenchBlocks(b *testing.B, workers, blocks int, repo, raw PairOp, key func(side int, i int64) int64) {
	b.Helper()
	if rate, ok := BenchSides(b, workers, blocks, [2]string{"repo", "raw"}, [2]PairOp{repo, raw}, key); ok {
		b.ReportMetric(rate[1]/rate[0], "overhead")
	}
}

// BenchVersus is BenchBlocks for a speedup: names[0]'s operations against names[1]'s, 16
// alternating blocks from parallelism×GOMAXPROCS goroutines, never both sides at once (both
// use this process's CPU, as a cache and the store under it do), reporting each side's ops/s
// and p99 and speedup = side 0's ops/s over side 1's.
func BenchVersus(b *testing.B, parallelism int, names [2]string, ops [2]PairOp) {
	b.Helper()
	identity := func(_ int, i int64) int64 { return i }
	if rate, ok := BenchSides(b, parallelism*runtime.GOMAXPROCS(0), 16, names, ops, identity); ok {
		b.ReportMetric(rate[0]/rate[1], "speedup")
	}
}

// BenchSides runs the alternating blocks and reports each side's ops/s and p99 under its
// name, returning both rates for the caller's own ratio; ok is false when an operation failed
// or a side ran nothing.
func BenchSides(b *testing.B, workers, blocks int, names [2]string, ops [2]PairOp, key func(side int, i int64) int64) (rate [2]float64, ok bool) {
	b.Helper()
	ctx := context.Background()
	warmUp(b, ops, key)
	perSide := int64(max(1, b.N/2))
	blocks = max(2, min(blocks, 2*int(perSide))) &^ 1
	var (
		next  [2]int64 // next index per side, across that side's blocks
		wall  [2]time.Duration
		lats  [2][]time.Duration
		mu    sync.Mutex
		fails atomic.Bool
	)
	b.ResetTimer()
	for blk := 0; blk < blocks && !fails.Load(); blk++ {
		side := blk % 2
		// This block's share of the side's operations; the last block takes the remainder.
		n := perSide / int64(blocks/2)
		if blk >= blocks-2 {
			n = perSide - next[side]
		}
		var idx atomic.Int64
		idx.Store(next[side])
		end := next[side] + n
		var wg sync.WaitGroup
		t0 := time.Now()
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var local []time.Duration
				for {
					i := idx.Add(1) - 1
					if i >= end || fails.Load() {
						break
					}
					s := time.Now()
					if err := ops[side](ctx, key(side, i)); err != nil {
						b.Error(err)
						fails.Store(true)
						break
					}
					local = append(local, time.Since(s))
				}
				mu.Lock()
				lats[side] = append(lats[side], local...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		wall[side] += time.Since(t0)
		next[side] = end
	}
	b.StopTimer()
	if fails.Load() || len(lats[0]) == 0 || len(lats[1]) == 0 {
		return rate, false
	}
	for side, name := range names {
		l := lats[side]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		rate[side] = float64(len(l)) / wall[side].Seconds()
		b.ReportMetric(rate[side], name+"-ops/s")
		b.ReportMetric(float64(l[(len(l)*99)/100].Microseconds())/1000, name+"-p99-ms")
	}
	return rate, true
}

// warmUp runs 64 untimed operations per side: connections, prepared statements and server
// caches hot before anything is timed.
func warmUp(b *testing.B, ops [2]PairOp, key func(side int, i int64) int64) {
	b.Helper()
	for i := pairWarmup; i < pairWarmup+64; i++ {
		for side, op := range ops {
			if err := op(context.Background(), key(side, i)); err != nil {
				b.Fatal(err)
			}
		}
	}
}
