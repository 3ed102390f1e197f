package launcher_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// The small-host settings and the client's write coalescing are chosen by these benchmarks:
// each compares A (the old value) with B on a one-node cluster at launcher.SizingBenchAddr,
// interleaved (A B A B ...) so that the load of whatever else runs on the machine falls on
// both alike. The workload is the shop's cart: half cart edits (a lightweight transaction),
// half cart reads, from 16 clients over 200 users. Run one at a time:
//
//	go test ./internal/cassandra/launcher/ -run '^$' -bench 'WriteCoalesce|SmallHostSizing' -benchtime 1x -timeout 60m -v

const (
	loadClients = 16
	loadUsers   = 200
	loadWarm    = 4 * time.Second
	loadRun     = 12 * time.Second
	abRounds    = 2 // A B A B
)

// loadResult is one measured run.
type loadResult struct {
	ops      int
	perSec   float64
	p50, p99 time.Duration
	errs     int
	load     string
}

func (r loadResult) String() string {
	return fmt.Sprintf("%7.1f ops/s  p50 %6.1f ms  p99 %6.1f ms  errors %d  (load %s)", r.perSec,
		float64(r.p50)/1e6, float64(r.p99)/1e6, r.errs, r.load)
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cartLoad runs the cart workload on st for warm, then measures it for run: loadClients
// clients, half edits and half reads.
func cartLoad(ctx context.Context, st *cassandrastore.Store, warm, run time.Duration) loadResult {
	return cartClients(ctx, st, loadClients, true, warm, run)
}

// cartClients is cartLoad with clients clients, editing half the time when edits is set and
// only reading otherwise.
func cartClients(ctx context.Context, st *cassandrastore.Store, clients int, edits bool, warm, run time.Duration) loadResult {
	repo := st.Carts()
	res := loadResult{load: loadavg()}
	var mu sync.Mutex
	var lat []time.Duration
	start := time.Now()
	measureFrom, end := start.Add(warm), start.Add(warm+run)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				now := time.Now()
				if now.After(end) {
					return
				}
				owner := cart.User(fmt.Sprintf("u%d", rng.IntN(loadUsers)))
				var err error
				if edits && rng.IntN(2) == 0 {
					item := cart.Item{ProductID: fmt.Sprintf("p%d", rng.IntN(30)), Category: "c", Quantity: int64(1 + rng.IntN(3)), AddedAt: now}
					_, err = repo.PutItem(ctx, owner, item, time.Time{}, now)
				} else if _, err = repo.ActiveCart(ctx, owner, now); err == cart.ErrNotFound {
					err = nil
				}
				d := time.Since(now)
				if now.Before(measureFrom) {
					continue
				}
				mu.Lock()
				if err != nil {
					res.errs++
				} else {
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	res.ops = len(lat)
	res.perSec = float64(len(lat)) / run.Seconds()
	if len(lat) > 0 {
		res.p50, res.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return res
}

// oneNode starts a one-node cluster with sizing z and the shop's schema in keyspace "bench".
// Its JIT stops at C1, as a test cluster's does: with the full JIT a node took 2.5 minutes to
// boot on a loaded 2-core machine, and both sides of a comparison run the same code.
func oneNode(ctx context.Context, b *testing.B, z launcher.Sizing) (hosts []string, stop func()) {
	b.Helper()
	c, err := launcher.New(launcher.Options{Nodes: 1, Dir: b.TempDir(), BaseAddr: launcher.SizingBenchAddr, HeapMB: 512,
		Sizing: z, C1Only: true, DieWithParent: true})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Up(ctx); err != nil {
		b.Fatal(err)
	}
	stop = func() {
		if err := c.Down(context.WithoutCancel(ctx)); err != nil {
			b.Errorf("stop the node: %v", err)
		}
	}
	if _, err := cassandrastore.ApplySchema(ctx, c.Hosts(), cassandrastore.SchemaOptions{Keyspace: "bench", RF: 1}); err != nil {
		stop()
		b.Fatal(err)
	}
	return c.Hosts(), stop
}

func openStore(ctx context.Context, b *testing.B, hosts []string, coalesce time.Duration) *cassandrastore.Store {
	b.Helper()
	st, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: hosts, Keyspace: "bench", WriteCoalesce: coalesce})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// summarize prints each side's runs and the ratio of the means, B over A.
func summarize(b *testing.B, name string, a, bb []loadResult) {
	b.Helper()
	mean := func(rs []loadResult, f func(loadResult) float64) float64 {
		t := 0.0
		for _, r := range rs {
			t += f(r)
		}
		return t / float64(len(rs))
	}
	ops := func(r loadResult) float64 { return r.perSec }
	p50 := func(r loadResult) float64 { return float64(r.p50) / 1e6 }
	p99 := func(r loadResult) float64 { return float64(r.p99) / 1e6 }
	fmt.Fprintf(os.Stderr, "%s: B/A throughput %.2f, p50 %.2f, p99 %.2f (A %.1f ops/s p50 %.1f ms p99 %.1f ms; B %.1f ops/s p50 %.1f ms p99 %.1f ms)\n",
		name, mean(bb, ops)/mean(a, ops), mean(bb, p50)/mean(a, p50), mean(bb, p99)/mean(a, p99),
		mean(a, ops), mean(a, p50), mean(a, p99), mean(bb, ops), mean(bb, p50), mean(bb, p99))
}

// BenchmarkSmallHostSizing measures each small-host setting alone against Cassandra's default
// (launcher.CassandraDefaults), a fresh node per run, in rounds of A, then each B in turn. Each
// run is printed as it ends (a long benchmark's log would come only at its end).
func BenchmarkSmallHostSizing(b *testing.B) {
	ctx := context.Background()
	with := func(f func(*launcher.Sizing)) launcher.Sizing {
		z := launcher.CassandraDefaults
		f(&z)
		return z
	}
	variants := []struct {
		name string
		z    launcher.Sizing
	}{
		{"A: Cassandra's defaults", launcher.CassandraDefaults},
		{"memtable space 64 -> 128 MiB", with(func(z *launcher.Sizing) { z.MemtableMiB = 128 })},
		{"concurrent reads/writes 32 -> 8", with(func(z *launcher.Sizing) { z.ConcurrentReads, z.ConcurrentWrites = 8, 8 })},
		{"transport threads 128 -> 16", with(func(z *launcher.Sizing) { z.TransportThreads = 16 })},
		{"GC pause goal 200 -> 50 ms", with(func(z *launcher.Sizing) { z.MaxGCPauseMillis = 50 })},
		{"small host: memtable 128 MiB and pause goal 50 ms", launcher.Sizing{MemtableMiB: 128, ConcurrentReads: 32,
			ConcurrentWrites: 32, TransportThreads: 128, MaxGCPauseMillis: 50}},
	}
	clients := loadClients
	if n, err := strconv.Atoi(os.Getenv("SHARDMART_SIZING_CLIENTS")); err == nil && n > 0 {
		clients = n // fewer clients: less of the machine's load in each run's figures
	}
	rounds := abRounds
	if n, err := strconv.Atoi(os.Getenv("SHARDMART_SIZING_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	// Reversed, A runs last in each round: a load that falls or rises through a run then
	// favours the other side, which tells a trend from an effect.
	reverse := os.Getenv("SHARDMART_SIZING_REVERSE") != ""
	only := os.Getenv("SHARDMART_SIZING_ONLY") // a comma-separated list of names to keep (A always runs)
	for range b.N {
		results := make([][]loadResult, len(variants))
		for round := range rounds {
			for j := range variants {
				i := j
				if reverse {
					i = len(variants) - 1 - j
				}
				v := variants[i]
				if i > 0 && only != "" && !slices.ContainsFunc(strings.Split(only, ","), func(o string) bool { return strings.Contains(v.name, o) }) {
					continue
				}
				hosts, stop := oneNode(ctx, b, v.z)
				st := openStore(ctx, b, hosts, 0)
				r := cartClients(ctx, st, clients, true, loadWarm, loadRun)
				st.Close()
				stop()
				results[i] = append(results[i], r)
				fmt.Fprintf(os.Stderr, "sizing: %s round %d: %s\n", v.name, round+1, r)
			}
		}
		for i, v := range variants[1:] {
			if len(results[i+1]) > 0 {
				summarize(b, v.name, results[0], results[i+1])
			}
		}
	}
}

// BenchmarkWriteCoalesce measures the client's write coalescing on one node: the driver's
// 200 µs (A) against each candidate (B), alternating stores on the same node.
func BenchmarkWriteCoalesce(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		hosts, stop := oneNode(ctx, b, launcher.Sizing{})
		defer stop()
		for _, cand := range []time.Duration{-1, 50 * time.Microsecond} {
			name := fmt.Sprintf("write coalescing 200 µs -> %s", cand)
			if cand < 0 {
				name = "write coalescing 200 µs -> off"
			}
			var as, bs []loadResult
			for round := range abRounds + 1 {
				for side, d := range []time.Duration{200 * time.Microsecond, cand} {
					st := openStore(ctx, b, hosts, d)
					r := cartLoad(ctx, st, loadWarm, loadRun)
					st.Close()
					b.Logf("%s round %d %s: %s", name, round+1, "AB"[side:side+1], r)
					if side == 0 {
						as = append(as, r)
					} else {
						bs = append(bs, r)
					}
				}
			}
			summarize(b, name, as, bs)
		}
	}
}

// BenchmarkWriteCoalesceLatency is BenchmarkWriteCoalesce for the latency of one client alone,
// cart reads only: the case where a frame has nothing to be coalesced with and only waits.
func BenchmarkWriteCoalesceLatency(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		hosts, stop := oneNode(ctx, b, launcher.Sizing{})
		defer stop()
		seed := openStore(ctx, b, hosts, 0)
		cartLoad(ctx, seed, 0, 3*time.Second) // carts to read
		seed.Close()
		var as, bs []loadResult
		for round := range 3 {
			for side, d := range []time.Duration{200 * time.Microsecond, -1} {
				st := openStore(ctx, b, hosts, d)
				r := cartClients(ctx, st, 1, false, 2*time.Second, 8*time.Second)
				st.Close()
				fmt.Fprintf(os.Stderr, "one client, reads: write coalescing 200 µs -> off round %d %s: %s\n", round+1, "AB"[side:side+1], r)
				if side == 0 {
					as = append(as, r)
				} else {
					bs = append(bs, r)
				}
			}
		}
		summarize(b, "one client, reads: write coalescing 200 µs -> off", as, bs)
	}
}
