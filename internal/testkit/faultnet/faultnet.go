// Package faultnet cuts network paths between local server processes for fault tests, with
// iptables rules in a chain of the test's own: created by New, jumped to from OUTPUT, flushed
// and deleted in t.Cleanup whatever the test's outcome. Everything here runs on loopback, so
// every packet passes OUTPUT once and every rule lives there.
//
// A local server binds its own 127.0.0.N, but may not bind it for the connections it opens
// (Cassandra 4+ does not: traffic from the node at 127.0.0.3 may leave from 127.0.0.1), so a
// source-address rule does not isolate it. A server started under a group of its own is told
// apart by `-m owner --gid-owner`; traffic towards it by its address and port.
//
// Needs root (CAP_NET_ADMIN) and iptables; rules are never counted on unverified: Dial probes
// the path the way the cut server would use it.
package faultnet

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// chainPrefix names every chain this package creates: SHARDMART_FAULT_<pid>_<n>.
const chainPrefix = "SHARDMART_FAULT_"

// Chain is an iptables chain of this test process, jumped to from OUTPUT. Its methods are
// for one goroutine at a time.
type Chain struct {
	name string
	// groups are the cgroups this chain moved processes into, by pid: a process cut from
	// several peers stays in one, and goes home once.
	groups map[int]string
}

var chains atomic.Int64

// New creates a fresh chain jumped to from the top of OUTPUT and registers its removal (the
// jump, the rules, the chain) in t.Cleanup. It first removes chains that an earlier test
// process of this package left behind when it was killed (their pid is gone). A missing
// iptables or missing privilege fails the test, never skips it.
func New(t testing.TB) *Chain {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Fatalf("faultnet needs iptables (apt-get install -y iptables): %v", err)
	}
	if err := removeOrphans(ctx); err != nil {
		t.Fatalf("faultnet: %v", err)
	}
	c := &Chain{name: fmt.Sprintf("%s%d_%d", chainPrefix, os.Getpid(), chains.Add(1)), groups: map[int]string{}}
	if _, err := iptables(ctx, "-N", c.name); err != nil {
		t.Fatalf("faultnet needs root to create an iptables chain: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := remove(ctx, c.name); err != nil {
			t.Errorf("faultnet: remove chain %s: %v", c.name, err)
		}
	})
	if _, err := iptables(ctx, "-I", "OUTPUT", "1", "-j", c.name); err != nil {
		t.Fatalf("faultnet: jump to %s: %v", c.name, err)
	}
	return c
}

// Name is the chain's name.
func (c *Chain) Name() string { return c.name }

// Append adds one rule (iptables -A <chain> rule...).
func (c *Chain) Append(ctx context.Context, rule ...string) error {
	if _, err := iptables(ctx, append([]string{"-A", c.name}, rule...)...); err != nil {
		return fmt.Errorf("faultnet: %w", err)
	}
	return nil
}

// CutOff isolates one server on port from its peers: packets towards addr:port are dropped,
// and so are packets that processes of group gid send to or from port (the server's own
// connections to its peers, and its answers). Other ports of addr stay reachable.
func (c *Chain) CutOff(ctx context.Context, addr string, gid, port int) error {
	if gid <= 0 {
		return fmt.Errorf("faultnet: cut off %s: the server runs under no group of its own (gid %d); start it as root", addr, gid)
	}
	p, g := strconv.Itoa(port), strconv.Itoa(gid)
	for _, rule := range [][]string{
		{"-d", addr, "-p", "tcp", "--dport", p, "-j", "DROP"},
		{"-p", "tcp", "--dport", p, "-m", "owner", "--gid-owner", g, "-j", "DROP"},
		{"-p", "tcp", "--sport", p, "-m", "owner", "--gid-owner", g, "-j", "DROP"},
	} {
		if err := c.Append(ctx, rule...); err != nil {
			return err
		}
	}
	return nil
}

// Heal removes every rule of the chain (the chain and its jump stay until cleanup).
func (c *Chain) Heal(ctx context.Context) error {
	if _, err := iptables(ctx, "-F", c.name); err != nil {
		return fmt.Errorf("faultnet: %w", err)
	}
	return nil
}

// ErrNoAnswer is Dial's error when the connection attempt timed out: what a DROP rule does,
// as opposed to a refused connection (nothing listens) or a probe that could not run.
var ErrNoAnswer = errors.New("no answer")

// Dial opens (and closes) a TCP connection to addr:port within timeout from a process in
// group gid, so the rules that match that group apply; gid 0 dials from this process's own
// group. It returns nil when the connection was established.
func Dial(ctx context.Context, gid int, addr string, port int, timeout time.Duration) error {
	return dial(ctx, gid, "", addr, port, timeout)
}

// dial runs prefix (shell commands) and then the connect in one bash child.
func dial(ctx context.Context, gid int, prefix, addr string, port int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// bash's /dev/tcp: a connect(2) in a child that can carry another group id.
	cmd := exec.CommandContext(ctx, "bash", "-c", fmt.Sprintf("%sexec 3<>/dev/tcp/%s/%d", prefix, addr, port))
	if gid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: uint32(os.Getuid()), Gid: uint32(gid), Groups: []uint32{}}}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("connect %s:%d as gid %d: %w within %s", addr, port, gid, ErrNoAnswer, timeout)
		}
		return fmt.Errorf("connect %s:%d as gid %d: %w: %s", addr, port, gid, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

func iptables(ctx context.Context, args ...string) (string, error) {
	// -w: wait for the xtables lock; other tests on the machine may hold it.
	cmd := exec.CommandContext(ctx, "iptables", append([]string{"-w", "10"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("iptables %v: %w: %s", args, err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// remove deletes the jump from OUTPUT (every copy), flushes and deletes the chain.
func remove(ctx context.Context, name string) error {
	for {
		if _, err := iptables(ctx, "-D", "OUTPUT", "-j", name); err != nil {
			break // no jump left
		}
	}
	if _, err := iptables(ctx, "-F", name); err != nil {
		return err
	}
	_, err := iptables(ctx, "-X", name)
	return err
}

var orphanChain = regexp.MustCompile(`^-N (` + chainPrefix + `(\d+)_\d+)$`)

// removeOrphans removes chains of this package whose creating process is gone (a test binary
// killed before its cleanup ran); chains of live processes are theirs to remove.
func removeOrphans(ctx context.Context) error {
	out, err := iptables(ctx, "-S")
	if err != nil {
		return fmt.Errorf("list iptables rules (root needed): %w", err)
	}
	var errs []error
	sc := bufio.NewScanner(bytes.NewBufferString(out))
	for sc.Scan() {
		m := orphanChain.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[2])
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue
		}
		if err := remove(ctx, m[1]); err != nil {
			errs = append(errs, fmt.Errorf("remove orphan chain %s: %w", m[1], err))
		}
	}
	return errors.Join(errs...)
}

// cgroupRoot is the cgroup v2 hierarchy (mounted here as the hybrid layout's "unified").
const cgroupRoot = "/sys/fs/cgroup/unified"

var cgroups atomic.Int64

// cgroupPrefix names every cgroup this package creates: shardmart-faultnet-<pid>-<n>.
const cgroupPrefix = "shardmart-faultnet-"

var orphanCgroup = regexp.MustCompile(`^` + cgroupPrefix + `(\d+)-\d+$`)

// removeOrphanCgroups removes the cgroups of test processes killed before their cleanup ran
// (their pid is gone; the server they held died with them, so the cgroup is empty).
func removeOrphanCgroups() {
	entries, _ := os.ReadDir(cgroupRoot)
	for _, e := range entries {
		m := orphanCgroup.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue
		}
		_ = os.Remove(cgroupRoot + "/" + e.Name())
	}
}

// CutProcess isolates a running server that shares its address and group with its peers (a
// local mongod): packets to and from its listening port are dropped (nobody reaches it), and
// so is everything its own sockets send — the connections it has open, by their ports, and any
// it opens later, by a cgroup v2 of the test's own that the process is moved into. Matching
// its port alone is no cut: its heartbeats and vote requests would still reach its peers.
// The process goes back to the cgroup it was in, and the cgroup is removed, in t.Cleanup; Heal
// lifts the rules at once. Nothing is verified here: the caller probes.
func (c *Chain) CutProcess(ctx context.Context, t testing.TB, pid, port int) error {
	t.Helper()
	group, conns, err := c.moved(t, pid)
	if err != nil {
		return err
	}
	p := strconv.Itoa(port)
	rules := [][]string{
		{"-p", "tcp", "--dport", p, "-j", "DROP"},
		{"-p", "tcp", "--sport", p, "-j", "DROP"},
		{"-m", "cgroup", "--path", group, "-j", "DROP"},
	}
	for _, cn := range conns {
		if cn[0] != p { // one it opened: both directions of exactly that connection
			rules = append(rules, connRules(cn)...)
		}
	}
	return c.appendAll(ctx, rules)
}

// CutBetween cuts two running servers that share their address and group (two local mongods)
// apart from each other only: neither reaches the other's listening port, the connections
// between them that are open are dropped both ways, and each stays reachable by everyone else
// (clients, a third server). New connections are told apart by a cgroup v2 of the chain's own
// per process, as in CutProcess; the processes go back in t.Cleanup, and Heal lifts the rules
// at once. A cut of one server from every peer while its clients still reach it is one
// CutBetween per peer. Nothing is verified here: the caller probes (DialFrom).
func (c *Chain) CutBetween(ctx context.Context, t testing.TB, pidA, portA, pidB, portB int) error {
	t.Helper()
	var rules [][]string
	for _, side := range [][4]int{{pidA, portA, pidB, portB}, {pidB, portB, pidA, portA}} {
		pid, peer := side[0], strconv.Itoa(side[3])
		group, conns, err := c.moved(t, pid)
		if err != nil {
			return err
		}
		rules = append(rules, []string{"-p", "tcp", "--dport", peer, "-m", "cgroup", "--path", group, "-j", "DROP"})
		for _, cn := range conns {
			if cn[1] == peer { // one it opened to the other: the other's accepted side is its mirror
				rules = append(rules, connRules(cn)...)
			}
		}
	}
	return c.appendAll(ctx, rules)
}

// DialFrom is Dial from a probe process placed in the cgroup this chain moved pid into, so
// the rules that match that process's new connections apply to the probe too.
func (c *Chain) DialFrom(ctx context.Context, pid int, addr string, port int, timeout time.Duration) error {
	group, ok := c.groups[pid]
	if !ok {
		return fmt.Errorf("faultnet: pid %d was not moved into a cgroup of chain %s", pid, c.name)
	}
	// The probe joins the cgroup before it creates its socket, which then carries the cgroup.
	return dial(ctx, 0, fmt.Sprintf("echo $$ > %s/%s/cgroup.procs && ", cgroupRoot, group), addr, port, timeout)
}

// moved moves pid into the chain's cgroup for it, then lists its open connections: those
// opened before the move keep their old cgroup and need rules of their own.
func (c *Chain) moved(t testing.TB, pid int) (string, [][2]string, error) {
	t.Helper()
	group, err := c.cgroup(t, pid)
	if err != nil {
		return "", nil, err
	}
	conns, err := connections(pid)
	if err != nil {
		return "", nil, fmt.Errorf("faultnet: connections of pid %d: %w", pid, err)
	}
	return group, conns, nil
}

// connRules drop both directions of one open connection, given as its two ports.
func connRules(cn [2]string) [][]string {
	return [][]string{{"-p", "tcp", "--sport", cn[0], "--dport", cn[1], "-j", "DROP"},
		{"-p", "tcp", "--sport", cn[1], "--dport", cn[0], "-j", "DROP"}}
}

func (c *Chain) appendAll(ctx context.Context, rules [][]string) error {
	for _, r := range rules {
		if err := c.Append(ctx, r...); err != nil {
			return err
		}
	}
	return nil
}

// cgroup moves pid into a cgroup v2 of the chain's own (once per pid) and registers its return
// to the cgroup it was in, and the cgroup's removal, in t.Cleanup. It returns the cgroup's path
// below cgroupRoot, as `-m cgroup --path` takes it.
func (c *Chain) cgroup(t testing.TB, pid int) (string, error) {
	t.Helper()
	if g, ok := c.groups[pid]; ok {
		return g, nil
	}
	if _, err := os.Stat(cgroupRoot + "/cgroup.procs"); err != nil {
		return "", fmt.Errorf("faultnet: cutting a process off needs cgroup v2 at %s: %w", cgroupRoot, err)
	}
	removeOrphanCgroups()
	home, err := cgroupOf(pid)
	if err != nil {
		return "", fmt.Errorf("faultnet: %w", err)
	}
	group := fmt.Sprintf("%s%d-%d", cgroupPrefix, os.Getpid(), cgroups.Add(1))
	dir := cgroupRoot + "/" + group
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("faultnet: %w", err)
	}
	t.Cleanup(func() {
		// A dead process has left already; a live one (and a probe still there) goes back.
		b, _ := os.ReadFile(dir + "/cgroup.procs")
		for _, p := range strings.Fields(string(b)) {
			_ = os.WriteFile(cgroupRoot+home+"/cgroup.procs", []byte(p), 0o644)
		}
		if err := os.Remove(dir); err != nil {
			t.Errorf("faultnet: remove cgroup %s: %v", dir, err)
		}
	})
	// New sockets of the process belong to its new cgroup; those it has keep theirs.
	if err := os.WriteFile(dir+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return "", fmt.Errorf("faultnet: move pid %d into cgroup %s: %w", pid, group, err)
	}
	c.groups[pid] = group
	return group, nil
}

// cgroupOf is pid's cgroup v2 path below cgroupRoot ("/" for the root), from /proc/pid/cgroup.
func cgroupOf(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return strings.TrimSuffix(p, "/"), nil
		}
	}
	return "", fmt.Errorf("pid %d has no cgroup v2 entry: %q", pid, b)
}

// connections lists the local and remote TCP ports of pid's established connections: its
// sockets (the inodes behind /proc/pid/fd) looked up in /proc/pid/net/tcp.
func connections(pid int) ([][2]string, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return nil, err
	}
	port := func(addr string) string {
		p, _ := strconv.ParseUint(addr[strings.IndexByte(addr, ':')+1:], 16, 16)
		return strconv.FormatUint(p, 10)
	}
	var out [][2]string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		f := strings.Fields(line)
		if len(f) >= 10 && f[3] == "01" && inodes[f[9]] {
			out = append(out, [2]string{port(f[1]), port(f[2])})
		}
	}
	return out, nil
}
