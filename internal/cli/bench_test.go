package cli

import (
	"context"
	"testing"
	"time"
)

// TestBenchFlags: the defaults are the SLO (p99 < 50 ms, errors < 1 %) and an
// unknown scenario or a rate of zero is refused before anything starts.
func TestBenchFlags(t *testing.T) {
	var got benchOptions
	run := func(args ...string) error {
		cmd := newCmdBench(IO{}, func(_ context.Context, o benchOptions) error { got = o; return nil })
		return execUnderRoot(t, cmd, append([]string{"bench"}, args...)...)
	}
	if err := run("--scenario", "flash-sale", "--find-max"); err != nil {
		t.Fatal(err)
	}
	if got.findMaxP99 != 50*time.Millisecond || got.findMaxErrors != 0.01 || !got.findMax || got.scenario != "flash-sale" {
		t.Errorf("options: %+v", got)
	}
	for _, args := range [][]string{{"--scenario", "black-friday"}, {"--rate", "0"}, {"--max-in-flight", "0"}} {
		if err := run(args...); err == nil {
			t.Errorf("bench %v accepted", args)
		}
	}
}
