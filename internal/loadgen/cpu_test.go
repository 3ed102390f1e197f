package loadgen_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/loadgen"
)

// startChild runs a shell command as a child process, killed (by its pid) at the end.
func startChild(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

// TestProcessCPUSeesABusyChild: a child spinning in a loop shows CPU time through its
// /proc stat, growing to 300 ms, while a sleeping child shows next to none.
func TestProcessCPUSeesABusyChild(t *testing.T) {
	busy, idle := startChild(t, "while :; do :; done"), startChild(t, "exec sleep 120")
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := loadgen.ProcessCPU(busy)
		if err != nil {
			t.Fatal(err)
		}
		if got >= 300*time.Millisecond {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a busy loop used only %s of CPU in 60 s", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got, err := loadgen.ProcessCPU(idle); err != nil || got > 100*time.Millisecond {
		t.Errorf("a sleeping child: %s of CPU (%v), want next to none", got, err)
	}
	if _, err := loadgen.ProcessCPU(1 << 30); err == nil {
		t.Error("a pid that does not exist was read")
	}
}

// TestRunReportsCPUPerRequest: a run accounting this process and a busy child reports each
// one's CPU over the window and divides it by the requests answered; this process's requests
// each spin for a fixed amount of work, so its CPU per request is above zero.
func TestRunReportsCPUPerRequest(t *testing.T) {
	busy := startChild(t, "while :; do :; done")
	spin := func(context.Context) (loadgen.Outcome, string) {
		x := 0
		for i := range 2_000_000 {
			x += i ^ x
		}
		if x == -1 {
			return loadgen.Failed, "impossible"
		}
		return loadgen.OK, ""
	}
	rep, err := loadgen.Run(context.Background(), loadgen.Schedule{Rate: 50, Warmup: 100 * time.Millisecond, Duration: time.Second,
		MaxInFlight: 64, CPU: []loadgen.Process{{Name: "self"}, {Name: "busy", PID: busy}, {Name: "gone", PID: 1 << 30}}},
		func(int) loadgen.Op { return loadgen.Op{Kind: "spin", Do: spin} })
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.CPU) != 3 {
		t.Fatalf("CPU of %d processes, want 3: %+v", len(rep.CPU), rep.CPU)
	}
	answered := rep.Total.OK
	for _, c := range rep.CPU[:2] {
		if c.Error != "" || c.Seconds <= 0 || c.PerRequestMS <= 0 {
			t.Errorf("%s: %+v, want CPU measured", c.Name, c)
		}
		if want := 1000 * c.Seconds / float64(answered); c.PerRequestMS != want {
			t.Errorf("%s: %.4f ms per request, want %.4f (%.3f s over %d requests)", c.Name, c.PerRequestMS, want, c.Seconds, answered)
		}
	}
	if rep.CPU[2].Error == "" {
		t.Errorf("a process that does not exist was measured: %+v", rep.CPU[2])
	}
	t.Logf("%+v", rep.CPU)
}
