package serverproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/eventually"
)

// A Group finds its servers through their pidfiles, knows which logs lines the last start
// wrote, signals a process or its group, stops a server (SIGTERM, then the pidfile goes) and
// kills the rest; a server that does not run is not signalled.
func TestGroupLifecycle(t *testing.T) {
	dir := t.TempDir()
	servers := []Server{
		{PIDFile: filepath.Join(dir, "0.pid"), Marker: "sleep\x0030\x00"},
		{PIDFile: filepath.Join(dir, "1.pid"), Marker: "sleep\x0031\x00"},
	}
	g := NewGroup(servers)
	log0 := filepath.Join(dir, "0.log")
	if err := os.WriteFile(log0, []byte("an earlier start\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := os.OpenFile(log0, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command("sh", "-c", "echo this start; exec sleep 30")
	cmd.Stdout = out
	c0, err := g.Start(0, cmd, true, log0)
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Kill()
	c1, err := g.Start(1, exec.Command("sleep", "31"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Kill()
	eventually.True(t, 10*time.Second, "server 0 to exec sleep", func() bool { pid, ok := g.LivePID(0); return ok && pid == c0.PID })
	if got := g.LogOffset(0, log0); got != int64(len("an earlier start\n")) {
		t.Errorf("LogOffset = %d, want the log's size before the start", got)
	}
	if got := g.NewLogLines(0, log0); !slices.Equal(got, []string{"this start"}) {
		t.Errorf("NewLogLines = %q, want only what this start wrote", got)
	}
	if _, ok := g.LivePID(2); ok {
		t.Error("an index past the group reads as live")
	}
	if got := g.Started(); len(got) != 2 || got[0] != c0 || got[1] != c1 {
		t.Errorf("Started = %v", got)
	}

	if err := g.SignalProcess(1, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 10*time.Second, func() error { return Stopped(c1.PID) })
	if err := g.SignalGroup(1, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, 10*time.Second, "server 1 to run again", func() bool { return Stopped(c1.PID) != nil })

	var logged bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	if err := g.Stop(context.Background(), 0, syscall.SIGTERM, 10*time.Second, logger, "stopping test server"); err != nil {
		t.Fatal(err)
	}
	if want := "stopping test server\" pid=" + strconv.Itoa(c0.PID) + " signal=terminated"; !strings.Contains(logged.String(), want) {
		t.Errorf("log %q lacks %q", logged.String(), want)
	}
	if gone, how := g.Exited(0); !gone || how != "signal: terminated" {
		t.Errorf("after Stop: exited %t (%q)", gone, how)
	}
	if g.Alive(0) {
		t.Error("a stopped server reads as alive")
	}
	if _, err := os.Stat(servers[0].PIDFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pidfile after Stop: %v", err)
	}
	if err := g.Stop(context.Background(), 0, syscall.SIGTERM, time.Second, logger, "again"); err != nil {
		t.Errorf("stopping a stopped server: %v", err)
	}
	if err := g.SignalGroup(0, syscall.SIGSTOP); !errors.Is(err, ErrNotRunning) {
		t.Errorf("signalling a stopped server: %v, want ErrNotRunning", err)
	}
	g.ForgetExited(0)
	g.ForgetExited(1)
	if got := g.Started(); len(got) != 1 || got[1] != c1 {
		t.Errorf("Started after forgetting the exited = %v, want server 1's child only", got)
	}

	g.KillAll()
	if gone, how := c1.Exited(); !gone || how != "signal: killed" {
		t.Errorf("after KillAll: exited %t (%q)", gone, how)
	}
	if _, err := os.Stat(servers[1].PIDFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pidfile after KillAll: %v", err)
	}
}

// A server another process started is known by its pidfile alone: gone when the pidfile names
// no process with its marker, alive while one does.
func TestGroupWithoutChildren(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "s.pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, untilReaped := range []bool{false, true} {
		g := NewGroup([]Server{{PIDFile: pidFile, Marker: "no-such-server"}})
		g.UntilReaped = untilReaped
		if gone, how := g.Exited(0); !gone || how != "no live process in its pidfile" {
			t.Errorf("Exited = %t, %q", gone, how)
		}
		if g.Alive(0) {
			t.Error("this test process was taken for the server")
		}
		self, err := os.ReadFile("/proc/self/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		g = NewGroup([]Server{{PIDFile: pidFile, Marker: string(self)}})
		g.UntilReaped = untilReaped
		if gone, _ := g.Exited(0); gone || !g.Alive(0) {
			t.Errorf("a live process named by the pidfile: exited %t, alive %t", gone, g.Alive(0))
		}
	}
}

// The state file is indented JSON (what earlier builds wrote and read), replaced whole, and a
// missing one is told apart from a broken one.
func TestStateFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.json")
	type state struct {
		Nodes int    `json:"nodes"`
		Addr  string `json:"addr"`
	}
	var got state
	if err := ReadState(path, "cluster", &got); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing state file: %v, want os.ErrNotExist", err)
	}
	for _, want := range []state{{Nodes: 3, Addr: "127.0.0.1"}, {Nodes: 1, Addr: "127.0.0.9"}} {
		if err := WriteState(path, want); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if old, _ := json.MarshalIndent(want, "", "  "); !bytes.Equal(b, old) {
			t.Errorf("state file %q, want %q", b, old)
		}
		if err := ReadState(path, "cluster", &got); err != nil || got != want {
			t.Errorf("ReadState = %+v, %v; want %+v", got, err, want)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("state file mode: %v, %v", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d files, want the state file alone", len(entries))
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := ReadState(path, "cluster", &got)
	if err == nil || errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "open cluster "+path+": ") {
		t.Errorf("broken state file: %v", err)
	}
}
