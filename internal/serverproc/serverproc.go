// Package serverproc runs the database servers the launchers start on this machine (Cassandra
// JVMs, mongods) as child processes, and holds what both launchers need around them: the life
// of a group of servers (Group: pidfiles, start, signals, stop, kill), the state file that lets
// another process find them (ReadState, WriteState), the binary cache directory and
// cross-process locks.
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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CacheDirEnv names the directory of the fetched server binaries and jars.
const CacheDirEnv = "SHARDMART_CACHE_DIR"

// CacheDir is where fetched server binaries and jars live, outside the repository:
// $SHARDMART_CACHE_DIR, else the user cache directory's shardmart folder.
func CacheDir() string {
	if d := os.Getenv(CacheDirEnv); d != "" {
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
	// cmd.Start returns once the exec cannot fail, but the new command line shows in /proc a
	// moment later (empty until then): wait for it, or ReadPID would not know the server yet.
	cmdline := filepath.Join("/proc", strconv.Itoa(c.PID), "cmdline")
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b, err := os.ReadFile(cmdline); err != nil || len(b) > 0 {
			break
		}
	}
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

// zombie reads the state field of /proc/PID/stat for Z.
func zombie(stat []byte) bool { return procState(stat) == 'Z' }

// procState is the state field of /proc/PID/stat ("pid (comm) S ..."; comm may hold spaces
// and ") "), 0 if there is none.
func procState(stat []byte) byte {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}

// Stopped is nil once every thread of pid is stopped (state T), else it says how many still
// run. kill(SIGSTOP) returns before that: each thread stops when it is next scheduled, which
// on a loaded machine can take long enough for a server to answer many more requests, so a
// test that freezes a server waits for this before it measures anything.
func Stopped(pid int) error {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return fmt.Errorf("threads of %d: %v (%d found)", pid, err, len(tasks))
	}
	var running []string
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // a thread that exited meanwhile
		}
		if procState(b) != 'T' {
			running = append(running, filepath.Base(filepath.Dir(f)))
		}
	}
	if len(running) > 0 {
		return fmt.Errorf("%d of %d threads of %d not stopped yet (%s)", len(running), len(tasks), pid, strings.Join(running[:min(5, len(running))], " "))
	}
	return nil
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
	// A server on its way out no longer reads as alive (its command line goes with its memory)
	// while its threads still close its ports and files: wait for the last of them, or a
	// restart finds its port taken.
	for deadline := time.Now().Add(30 * time.Second); exiting(pid) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// exiting reports whether pid is a process part way through its exit: its memory released
// (an empty command line, and not a kernel thread, which has none either) and it not yet a
// zombie, or a zombie main thread whose other threads still run.
func exiting(pid int) bool {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
	if err != nil || len(cmdline) > 0 {
		return false // gone, or running (a recycled pid at worst: not ours to wait for)
	}
	st, err := os.ReadFile(filepath.Join(proc, "stat"))
	if err != nil || kernelThread(st) {
		return false
	}
	if !zombie(st) {
		return true
	}
	tasks, err := os.ReadDir(filepath.Join(proc, "task"))
	return err == nil && len(tasks) > 1
}

// kernelThread reads the flags field of /proc/PID/stat (the 9th) for PF_KTHREAD.
func kernelThread(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(stat[i+1:])) // state, ppid, pgrp, session, tty, tpgid, flags, …
	if len(f) < 7 {
		return false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return err == nil && flags&0x00200000 != 0
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

// ErrExited marks the error of a server that exited while something waited for it.
var ErrExited = errors.New("server exited")

// FailOnExit returns a context that ends as soon as one of children exits, with cause(key,
// child) as its cause, so a wait on a server that died stops at once instead of running to its
// timeout; cause should wrap ErrExited. explain turns the error of such a wait into the exit's
// when a child has died, even if the wait noticed the death first (a peer refusing a
// connection). stop releases the watchers.
func FailOnExit[K comparable](ctx context.Context, children map[K]*Child, cause func(K, *Child) error) (_ context.Context, explain func(error) error, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	for k, c := range children {
		go func() {
			select {
			case <-c.exited:
				cancel(cause(k, c))
			case <-ctx.Done():
			}
		}()
	}
	explain = func(err error) error {
		if err == nil {
			return nil
		}
		if c := context.Cause(ctx); errors.Is(c, ErrExited) {
			return c
		}
		for k, c := range children {
			if c.dead() {
				select { // reaped in a moment: its wait status says how it died
				case <-c.exited:
				case <-time.After(5 * time.Second):
				}
				return cause(k, c)
			}
		}
		return err
	}
	return ctx, explain, func() { cancel(context.Canceled) }
}

// dead reports whether the child has exited, reaped or not yet.
func (c *Child) dead() bool {
	if gone, _ := c.Exited(); gone {
		return true
	}
	st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c.PID), "stat"))
	return err != nil || zombie(st)
}

// StopAll stops every live server whose pidfile (named pidName) lies anywhere under dir,
// whichever layout left it there: SIGTERM, SIGKILL after grace, all in parallel. marker(d)
// is what the command line of the server in directory d (the pidfile's, absolute) must
// contain, so a pid that is not that server is never signalled. skip names subdirectories not
// worth walking (server data). It returns how many servers it stopped.
func StopAll(ctx context.Context, dir, pidName string, marker func(dir string) string, skip []string, grace time.Duration, log *slog.Logger) (int, error) {
	dir, err := filepath.Abs(dir) // servers are started with absolute paths, which markers hold
	if err != nil {
		return 0, err
	}
	var pidFiles []string
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			if errors.Is(err, os.ErrNotExist) {
				return nil
			}
			return err
		case d.IsDir() && path != dir && slices.Contains(skip, d.Name()):
			return filepath.SkipDir
		case !d.IsDir() && d.Name() == pidName:
			pidFiles = append(pidFiles, path)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("find servers under %s: %w", dir, err)
	}
	errs := make(chan error, len(pidFiles))
	stopped := 0
	for _, pf := range pidFiles {
		m := marker(filepath.Dir(pf))
		pid, ok := ReadPID(pf, m)
		if !ok {
			errs <- nil
			continue
		}
		stopped++
		go func() {
			alive := func() bool { _, ok := ReadPID(pf, m); return ok }
			if err := SignalAndWait(ctx, pid, syscall.SIGTERM, grace, alive, log); err != nil {
				errs <- fmt.Errorf("%s: %w", pf, err)
				return
			}
			_ = os.Remove(pf)
			errs <- nil
		}()
	}
	var all []error
	for range pidFiles {
		all = append(all, <-errs)
	}
	return stopped, errors.Join(all...)
}

// LogSize is how long the log at path is now (0 when absent). Servers append to their logs, so
// what a start writes, and only that, is what LogLinesSince(path, LogSize before it) returns.
func LogSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// LogLinesSince returns the lines of the log at path after offset (all of it when the log was
// replaced by a shorter one).
func LogLinesSince(path string, offset int64) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	if offset <= int64(len(b)) {
		b = b[offset:]
	}
	s := strings.TrimRight(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// ForTest starts one test's own server with start, bounded by timeout, and stops it in
// t.Cleanup, even when the test fails or panics, after logTails when it failed. A missing
// prerequisite (an error that is prereq) fails the test, never a skip, after need.
func ForTest[S any](t TB, timeout time.Duration, start func(context.Context) (S, func(), error), prereq error, need string, logTails func(S)) S {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, stop, err := start(ctx)
	if err != nil {
		if errors.Is(err, prereq) {
			t.Fatalf("%s: %v", need, err)
		}
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logTails(s)
		}
		stop()
	})
	return s
}

// TB is the part of testing.TB the launchers' test helpers use. It is declared here, not
// taken from package testing, so that the shardmart binary, which links the launchers, does
// not link the testing package; a *testing.T or *testing.B satisfies it.
type TB interface {
	Helper()
	Cleanup(func())
	Failed() bool
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	TempDir() string
}
