package advise

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time: on a shared machine the
// wall clock also counts time spent waiting for a core, so ops per CPU-second
// is the per-core figure; ops/s (wall) is reported next to it.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSimulate measures simulated operations per second for every
// candidate of the built-in scenarios. Run with -cpu 1 for the per-core rate.
func BenchmarkSimulate(b *testing.B) {
	names := []string{"orders", "products", "carts", "ascending", "random", "location", "firehose", "multihotspot", "tiers"}
	for _, name := range names {
		w, err := LoadScenario(name)
		if err != nil {
			b.Fatal(err)
		}
		c := w.Collections[0]
		for _, cand := range c.Candidates {
			b.Run(name+"/"+cand.String(), func(b *testing.B) {
				var ops int64
				cpu0 := cpuTime(b)
				for b.Loop() {
					r, err := SimulateCandidate(context.Background(), w, c, cand)
					if err != nil {
						b.Fatal(err)
					}
					ops += r.Ops
				}
				b.ReportMetric(float64(ops)/b.Elapsed().Seconds(), "ops/s")
				b.ReportMetric(float64(ops)/(cpuTime(b)-cpu0).Seconds(), "ops/cpu-s")
			})
		}
	}
}
