package advise

import (
	"context"
	"testing"
)

// BenchmarkSimulate measures simulated operations per second on one core
// for each built-in scenario's first candidate and its hashed/range rivals.
func BenchmarkSimulate(b *testing.B) {
	for _, name := range []string{"orders", "products", "carts", "ascending", "firehose", "multihotspot"} {
		w, err := LoadScenario(name)
		if err != nil {
			b.Fatal(err)
		}
		c := w.Collections[0]
		for _, cand := range c.Candidates {
			b.Run(name+"/"+cand.Key.String(), func(b *testing.B) {
				var ops int64
				for b.Loop() {
					r, err := SimulateCandidate(context.Background(), w, c, cand)
					if err != nil {
						b.Fatal(err)
					}
					ops += r.Ops
				}
				b.ReportMetric(float64(ops)/b.Elapsed().Seconds(), "ops/s")
			})
		}
	}
}
