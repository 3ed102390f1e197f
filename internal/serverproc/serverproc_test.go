package serverproc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// ReadPID trusts a pidfile only for a live process whose command line carries the marker, so
// a recycled pid is never signalled; a reaped child is gone.
func TestReadPIDChecksTheCommandLine(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	c, err := Start(exec.Command("sleep", "30"), pidFile, true)
	if err != nil {
		t.Fatal(err)
	}
	if pid, ok := ReadPID(pidFile, "sleep\x0030"); !ok || pid != c.PID {
		t.Fatalf("ReadPID of a live child: %d, %t; want %d", pid, ok, c.PID)
	}
	if _, ok := ReadPID(pidFile, "mongod"); ok {
		t.Error("a process without the marker was taken for the server")
	}
	err = SignalAndWait(context.Background(), c.PID, syscall.SIGTERM, 5*time.Second, func() bool {
		gone, _ := c.Exited()
		return !gone
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gone, how := c.Exited(); !gone || how == "" {
		t.Errorf("after SIGTERM: exited %t (%q)", gone, how)
	}
	if _, ok := ReadPID(pidFile, "sleep"); ok {
		t.Error("a reaped child still reads as live")
	}
	_ = os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	if _, ok := ReadPID(pidFile, "no-such-marker"); ok {
		t.Error("this test process was taken for the server")
	}
}

func TestZombie(t *testing.T) {
	for stat, want := range map[string]bool{
		"12 (mongod) S 1 12": false,
		"12 (a) b) Z 1 12":   true,
		"12 (java) R 1":      false,
	} {
		if got := zombie([]byte(stat)); got != want {
			t.Errorf("zombie(%q) = %t, want %t", stat, got, want)
		}
	}
}
