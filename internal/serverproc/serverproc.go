// Package serverproc runs the database servers the launchers start on this machine (Cassandra
// JVMs, mongods) as child processes, and holds what both launchers need around them: the binary
// cache directory and cross-process locks.
//
// A server runs in its own session, so Ctrl-C on the starting command does not reach it and a
// signal to -pid reaches it and anything it forked. With DieWithParent the kernel SIGKILLs it
// when the starting process dies (PR_SET_PDEATHSIG), so a crashed or killed `go test` leaves no
// server behind; the kernel ties that to the forking OS thread, and Go retires a thread only when
// a goroutine exits while locked to it, which nothing here does.
package serverproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// CacheDir is where fetched server binaries and jars live, outside the repository:
// $SHARDMART_CACHE_DIR, else the user cache directory's shardmart folder.
func CacheDir() string {
	if d := os.Getenv("SHARDMART_CACHE_DIR"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "shardmart")
	}
	return filepath.Join(os.TempDir(), "shardmart-cache")
}

// Child is a server process this process started and reaps.
type Child struct {
	PID    int
	exited chan struct{}
	state  *os.ProcessState // set before exited closes
}

// Start starts cmd in its own session (dying with this process when dieWithParent), writes its
// pid to pidFile, and reaps it in the background. Attributes already in cmd.SysProcAttr (such as
// a Credential) are kept.
func Start(cmd *exec.Cmd, pidFile string, dieWithParent bool) (*Child, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	if dieWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Child{PID: cmd.Process.Pid, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); c.state = cmd.ProcessState; close(c.exited) }()
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(c.PID)+"\n"), 0o644); err != nil {
		_ = syscall.Kill(-c.PID, syscall.SIGKILL)
		return nil, fmt.Errorf("pidfile: %w", err)
	}
	return c, nil
}

// Exited reports whether the child has exited and, if so, how (its wait status).
func (c *Child) Exited() (bool, string) {
	select {
	case <-c.exited:
		return true, c.state.String()
	default:
		return false, ""
	}
}

// Kill SIGKILLs the child's process group and waits up to 30 s for it to be reaped.
func (c *Child) Kill() {
	_ = syscall.Kill(-c.PID, syscall.SIGKILL)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
	}
}

// ReadPID returns the pid in pidFile when that process is alive, not a zombie, and its command
// line contains marker (so a recycled pid is never signalled).
func ReadPID(pidFile, marker string) (int, bool) {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, false
	}
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil || pid <= 0 {
		return 0, false
	}
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
	if err != nil || !bytes.Contains(cmdline, []byte(marker)) {
		return 0, false
	}
	if st, err := os.ReadFile(filepath.Join(proc, "stat")); err == nil && zombie(st) {
		return 0, false
	}
	return pid, true
}

// zombie reads the state field of /proc/PID/stat ("pid (comm) S ..."; comm may hold spaces).
func zombie(stat []byte) bool {
	for i := len(stat) - 1; i >= 0; i-- {
		if stat[i] == ')' {
			return i+2 < len(stat) && stat[i+2] == 'Z'
		}
	}
	return false
}

// SignalAndWait sends sig to the process group of pid and waits until alive reports false. A
// SIGTERM not obeyed within grace (or by ctx's end) becomes a SIGKILL, logged; a process that
// survives SIGKILL for 30 s more is an error.
func SignalAndWait(ctx context.Context, pid int, sig syscall.Signal, grace time.Duration, alive func() bool, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	_ = syscall.Kill(pid, syscall.SIGCONT) // a stopped process cannot handle SIGTERM
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	deadline := time.Now().Add(grace)
	for alive() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			if sig == syscall.SIGKILL {
				return fmt.Errorf("pid %d survived SIGKILL", pid)
			}
			log.Warn("server ignored SIGTERM, killing", "pid", pid)
			sig, deadline = syscall.SIGKILL, time.Now().Add(30*time.Second)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// Lock takes an exclusive flock on path, polling so ctx can cancel the wait. The kernel drops
// the lock when the process dies, so a killed holder never blocks the next one.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if err := Sleep(ctx, 100*time.Millisecond); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", path, err)
		}
	}
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// TestServer is a throwaway server a test binary starts and kills: a replica set, a sharded
// cluster, a Cassandra cluster.
type TestServer interface {
	Up(ctx context.Context) error
	KillAll()
}

// StartShared is the one recipe for a test binary's shared server. With dir "" it uses a
// temporary directory (named after what) that stop removes; a cross-process lock on lockName
// (in $TMPDIR) makes a second test binary wanting the same addresses wait instead of clash;
// build lays the server out in the directory; Up starts it. stop SIGKILLs it (the data is
// thrown away, so no drain: fast and certain) and releases the lock.
func StartShared[S TestServer](ctx context.Context, what, dir, lockName string, build func(dir string) (S, error)) (s S, stop func(), err error) {
	var tmp string
	if dir == "" {
		if tmp, err = os.MkdirTemp("", "shardmart-"+what+"-"); err != nil {
			return s, nil, fmt.Errorf("start test %s: %w", what, err)
		}
		dir = tmp
	}
	unlock, err := Lock(ctx, filepath.Join(os.TempDir(), lockName))
	if err != nil {
		if tmp != "" {
			_ = os.RemoveAll(tmp)
		}
		return s, nil, err
	}
	cleanup := func() {
		unlock()
		if tmp != "" {
			_ = os.RemoveAll(tmp)
		}
	}
	if s, err = build(dir); err != nil {
		cleanup()
		return s, nil, err
	}
	stop = func() {
		s.KillAll()
		cleanup()
	}
	if err := s.Up(ctx); err != nil {
		stop()
		return s, nil, fmt.Errorf("start test %s: %w", what, err)
	}
	return s, stop, nil
}
