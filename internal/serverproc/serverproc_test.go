package serverproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/eventually"
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

func TestKernelThread(t *testing.T) {
	if st, err := os.ReadFile("/proc/2/stat"); err == nil && strings.HasPrefix(string(st), "2 (kthreadd)") && !kernelThread(st) {
		t.Errorf("kthreadd is not taken for a kernel thread: %q", st)
	}
	if st, err := os.ReadFile("/proc/self/stat"); err != nil || kernelThread(st) {
		t.Errorf("this test process is taken for a kernel thread: %q, %v", st, err)
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

// Stopped holds only once every thread of a SIGSTOPped process is stopped, and no longer once
// it is continued.
func TestStopped(t *testing.T) {
	cmd := exec.Command("python3", "-c", `import sys, threading
for _ in range(4):
    threading.Thread(target=sys.stdin.read).start()
sys.stdin.read()`, "stopped-test")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(cmd, filepath.Join(t.TempDir(), "pid"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill()
	defer stdin.Close()
	eventually.NoError(t, 20*time.Second, func() error { // the interpreter and its 4 threads
		if tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", c.PID)); len(tasks) < 5 {
			return fmt.Errorf("%d threads", len(tasks))
		}
		return nil
	})
	if err := Stopped(c.PID); err == nil {
		t.Fatal("a running process reads as stopped")
	}
	if err := syscall.Kill(c.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 20*time.Second, func() error { return Stopped(c.PID) })
	if err := syscall.Kill(c.PID, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 20*time.Second, "continued threads read as running", func() bool { return Stopped(c.PID) != nil })
	if err := Stopped(1 << 30); err == nil {
		t.Error("a pid that does not exist reads as stopped")
	}
}

func TestProcState(t *testing.T) {
	for stat, want := range map[string]byte{
		"12 (java) T 1 12": 'T',
		"12 (a) b) S 1 12": 'S',
		"12 (no state)":    0,
		"garbage":          0,
	} {
		if got := procState([]byte(stat)); got != want {
			t.Errorf("procState(%q) = %q, want %q", stat, got, want)
		}
	}
}

// A wait on FailOnExit's context ends when a watched child exits, with the cause naming that
// child and how it exited, while a child that keeps running ends nothing.
func TestFailOnExitEndsTheWaitWithTheCause(t *testing.T) {
	dir := t.TempDir()
	long, err := Start(exec.Command("sleep", "30"), filepath.Join(dir, "long.pid"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Kill()
	dies, err := Start(exec.Command("sh", "-c", "read x; exit 3"), filepath.Join(dir, "dies.pid"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer dies.Kill()
	parent, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx, explain, stop := FailOnExit(parent, map[string]*Child{"long": long, "dies": dies}, func(name string, c *Child) error {
		_, how := c.Exited()
		return fmt.Errorf("%w: %s, pid %d (%s)", ErrExited, name, c.PID, how)
	})
	defer stop()
	// sh reads its stdin, which is /dev/null: it exits now, on its own.
	<-ctx.Done()
	err = explain(ctx.Err())
	if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), fmt.Sprintf("dies, pid %d (exit status 3)", dies.PID)) {
		t.Fatalf("cause %v; want pid %d's exit status 3", err, dies.PID)
	}
	if gone, _ := long.Exited(); gone {
		t.Error("the running child was touched")
	}
	if err := explain(nil); err != nil {
		t.Errorf("explain(nil) = %v", err)
	}
}

// StopAll finds every pidfile under a directory, however deep, and stops the servers they
// name, but never a pid whose command line is not that directory's server, and never looks
// into skipped directories.
func TestStopAllStopsOnlyTheDirectorysServers(t *testing.T) {
	dir := t.TempDir()
	marker := func(d string) string { return "\x00" + d + "\x00" }
	start := func(rel, arg string) *Child {
		t.Helper()
		d := filepath.Join(dir, rel)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		// The directory rides in sh's command line as $0, as --dbpath does in mongod's.
		c, err := Start(exec.Command("sh", "-c", "sleep 60", arg), filepath.Join(d, "srv.pid"), true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Kill)
		return c
	}
	a := start("a", filepath.Join(dir, "a"))
	nested := start("b/c", filepath.Join(dir, "b/c"))
	foreign := start("d", "not-this-directory") // a recycled pid: alive, but not d's server
	skipped := start("data/e", filepath.Join(dir, "data/e"))
	if err := os.MkdirAll(filepath.Join(dir, "stale"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stale", "srv.pid"), []byte("999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := StopAll(ctx, dir, "srv.pid", marker, []string{"data"}, 10*time.Second, nil)
	if err != nil || n != 2 {
		t.Fatalf("StopAll = %d, %v; want 2 stopped", n, err)
	}
	for name, c := range map[string]*Child{"a": a, "b/c": nested} {
		if _, ok := ReadPID(filepath.Join(dir, name, "srv.pid"), marker(filepath.Join(dir, name))); ok {
			t.Errorf("%s: still running", name)
		}
		if _, err := os.Stat(filepath.Join(dir, name, "srv.pid")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: pidfile left: %v", name, err)
		}
		select {
		case <-c.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("%s: not reaped 10 s after StopAll", name)
		}
	}
	for name, c := range map[string]*Child{"foreign": foreign, "skipped": skipped} {
		if gone, how := c.Exited(); gone {
			t.Errorf("%s server was stopped (%s)", name, how)
		}
	}
}

// A server whose main thread has exited while other threads still run (holding its ports) no
// longer reads as live, so SignalAndWait also waits for its last thread.
func TestSignalAndWaitWaitsForTheLastThread(t *testing.T) {
	dir := t.TempDir()
	// The main thread exits at once; a second one runs until its stdin closes.
	cmd := exec.Command("python3", "-c", `import ctypes, sys, threading
threading.Thread(target=sys.stdin.read).start()
ctypes.CDLL(None).pthread_exit(None)`, "threads-test")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Start(cmd, filepath.Join(dir, "pid"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Kill()
	deadline := time.Now().Add(20 * time.Second)
	// Zombie leader, live threads: exiting alone would also be true for the moment of the
	// exec, when the command line reads empty before python runs.
	for !mainExitedAlone(c.PID) {
		if time.Now().After(deadline) {
			t.Fatal("the main thread did not exit alone within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := ReadPID(filepath.Join(dir, "pid"), "threads-test"); ok {
		t.Fatal("a zombie main thread reads as live")
	}
	_ = stdin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = SignalAndWait(ctx, c.PID, 0, 10*time.Second, func() bool {
		_, ok := ReadPID(filepath.Join(dir, "pid"), "threads-test")
		return ok
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if exiting(c.PID) {
		t.Fatal("SignalAndWait returned while a thread of the server still ran")
	}
}

// mainExitedAlone: pid's main thread is a zombie while other threads of it still run.
func mainExitedAlone(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil || !zombie(st) {
		return false
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return err == nil && len(tasks) > 1
}
