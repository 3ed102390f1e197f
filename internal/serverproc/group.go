package serverproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Server is where one server of a Group keeps its pidfile, and what its command line
// contains (so a recycled pid is never taken for it).
type Server struct {
	PIDFile string
	Marker  string
}

// LivePID returns the pid in the server's pidfile when that process is this server.
func (s Server) LivePID() (int, bool) { return ReadPID(s.PIDFile, s.Marker) }

// ErrNotRunning is the error of signalling a server that does not run.
var ErrNotRunning = errors.New("not running")

// Group is the servers of one launcher (the nodes of a cluster, the members of a replica set)
// by index, whichever process started them: each is found through its pidfile, and those this
// process started are also known as children, with where their logs stood when they started.
// Its methods may be called from several goroutines.
type Group struct {
	// UntilReaped makes a child of this process count as alive until it is reaped, not only
	// while its pidfile names it: a SIGKILLed JVM's main thread shows as a zombie while its
	// other threads still exit and hold its sockets, so a restart at once would find its ports
	// still in use.
	UntilReaped bool

	servers  []Server
	mu       sync.Mutex
	children map[int]*Child
	logFrom  map[int]map[string]int64
}

// NewGroup is the group of servers, index i being servers[i].
func NewGroup(servers []Server) *Group {
	return &Group{servers: servers, children: map[int]*Child{}, logFrom: map[int]map[string]int64{}}
}

// LivePID returns server i's pid while it runs (per its pidfile).
func (g *Group) LivePID(i int) (int, bool) {
	if i < 0 || i >= len(g.servers) {
		return 0, false
	}
	return g.servers[i].LivePID()
}

// Start starts server i with cmd (see Start) after noting the sizes of logs, the files its
// output goes to, for NewLogLines and LogOffset.
func (g *Group) Start(i int, cmd *exec.Cmd, dieWithParent bool, logs ...string) (*Child, error) {
	from := make(map[string]int64, len(logs))
	for _, l := range logs {
		from[l] = LogSize(l)
	}
	c, err := Start(cmd, g.servers[i].PIDFile, dieWithParent)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.children[i], g.logFrom[i] = c, from
	g.mu.Unlock()
	return c, nil
}

// LogOffset is how long log was when this process last started server i (0 if it did not).
func (g *Group) LogOffset(i int, log string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.logFrom[i][log]
}

// NewLogLines are the lines of log written since this process last started server i.
func (g *Group) NewLogLines(i int, log string) []string {
	return LogLinesSince(log, g.LogOffset(i, log))
}

func (g *Group) child(i int) *Child {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.children[i]
}

// Started are the children this process started, by index.
func (g *Group) Started() map[int]*Child {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.children)
}

// ForgetExited drops server i's child of an earlier start once it has exited.
func (g *Group) ForgetExited(i int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c := g.children[i]; c != nil {
		if gone, _ := c.Exited(); gone {
			delete(g.children, i)
		}
	}
}

// Exited tells whether server i is gone while it starts, and how. For a child of this process
// its own exit is the truth (and its wait status says how); the pidfile is only consulted for
// a server started by another process.
func (g *Group) Exited(i int) (bool, string) {
	if c := g.child(i); c != nil {
		return c.Exited()
	}
	if _, ok := g.LivePID(i); !ok {
		return true, "no live process in its pidfile"
	}
	return false, ""
}

// Alive reports whether server i still runs: per its pidfile, and for a child of this
// process, until it is reaped (UntilReaped) or no longer once it is.
func (g *Group) Alive(i int) bool {
	if c := g.child(i); c != nil {
		gone, _ := c.Exited()
		if !gone && g.UntilReaped {
			return true
		}
		if gone && !g.UntilReaped {
			return false
		}
	}
	_, ok := g.LivePID(i)
	return ok
}

// SignalGroup sends sig to server i's process group; ErrNotRunning when it does not run.
func (g *Group) SignalGroup(i int, sig syscall.Signal) error { return g.signal(i, sig, true) }

// SignalProcess sends sig to server i's process alone; ErrNotRunning when it does not run.
func (g *Group) SignalProcess(i int, sig syscall.Signal) error { return g.signal(i, sig, false) }

func (g *Group) signal(i int, sig syscall.Signal, group bool) error {
	pid, ok := g.LivePID(i)
	if !ok {
		return ErrNotRunning
	}
	if group {
		pid = -pid
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("%s: %w", sig, err)
	}
	return nil
}

// Stop sends sig to server i's process group and waits until it no longer runs (see
// SignalAndWait: a SIGTERM not obeyed within grace becomes a SIGKILL), then removes its
// pidfile. A server that does not run is no error. stopping, unless empty, is logged at Info
// with the pid and signal before the signal is sent.
func (g *Group) Stop(ctx context.Context, i int, sig syscall.Signal, grace time.Duration, log *slog.Logger, stopping string) error {
	pid, ok := g.LivePID(i)
	if !ok {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	if stopping != "" {
		log.Info(stopping, "pid", pid, "signal", sig.String())
	}
	if err := SignalAndWait(ctx, pid, sig, grace, func() bool { return g.Alive(i) }, log); err != nil {
		return err
	}
	// A child of this process no longer runs once it is a zombie; wait for its reaping too, so
	// that Exited tells how it ended as soon as Stop returns.
	if c := g.child(i); c != nil {
		select {
		case <-c.exited:
		case <-ctx.Done():
			return fmt.Errorf("serverproc: server %d stopped, not yet reaped: %w", i, ctx.Err())
		}
	}
	_ = os.Remove(g.servers[i].PIDFile)
	return nil
}

// KillAll SIGKILLs every server's process group without waiting for a shutdown, waits for
// this process's children to be reaped, and removes the pidfiles; for throwaway data.
func (g *Group) KillAll() {
	for i, s := range g.servers {
		if pid, ok := s.LivePID(); ok {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		if c := g.child(i); c != nil {
			c.Kill()
		}
		_ = os.Remove(s.PIDFile)
	}
}
