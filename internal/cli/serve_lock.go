package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The embedded store is one SQLite file that one process writes through its single writer
// connection; every guarantee of several processes (a shared card-cache tail, shared rate
// limits) is built on a store they can share, which the embedded one is not meant to be. So a
// second serve on the same data directory is refused at start, naming the directory and the
// process holding it, instead of running with per-process limits and caches.

const lockFile = "serve.lock"

// lockDataDir takes an exclusive flock on dir's lock file for as long as the process lives
// (the kernel drops it when the process dies, however it dies) and writes this process's pid
// in it for the next one's message.
func lockDataDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := "another process"
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = fmt.Sprintf("process %d", pid)
			}
		}
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data directory %s is in use by %s (a shardmart serve holds %s): the embedded store "+
				"takes one serve process; stop it, give this one another --data-dir, or run several processes on MongoDB "+
				"(docs/guides/load-balancer.md)", dir, holder, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		_ = f.Truncate(0)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
