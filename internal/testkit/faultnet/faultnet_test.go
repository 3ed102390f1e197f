package faultnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Two "servers" share a port on two loopback addresses, as Cassandra nodes share the storage
// port. The one at .91 is cut off: nothing reaches it, and a process of its group (46999, used
// by no server) reaches no peer on that port, while this process still reaches .92. Healing
// restores both paths, and the chain is gone after cleanup.
func TestCutOffDropsInboundByAddressAndOutboundByGroup(t *testing.T) {
	const (
		cutAddr  = "127.0.0.91"
		peerAddr = "127.0.0.92"
		cutGID   = 46999
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := listenPair(t, cutAddr, peerAddr)
	var name string
	t.Run("cut", func(t *testing.T) {
		c := New(t)
		name = c.Name()
		reach(t, ctx, 0, cutAddr, port, true)
		reach(t, ctx, cutGID, peerAddr, port, true)
		if err := c.CutOff(ctx, cutAddr, cutGID, port); err != nil {
			t.Fatal(err)
		}
		reach(t, ctx, 0, cutAddr, port, false)       // towards the cut server
		reach(t, ctx, cutGID, peerAddr, port, false) // from its group to a peer
		reach(t, ctx, 0, peerAddr, port, true)       // everyone else still talks
		if err := c.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		reach(t, ctx, 0, cutAddr, port, true)
		reach(t, ctx, cutGID, peerAddr, port, true)
	})
	out, err := iptables(ctx, "-S")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, name) {
		t.Errorf("chain %s still present after cleanup:\n%s", name, out)
	}
}

func TestCutOffRefusesAServerWithoutItsOwnGroup(t *testing.T) {
	c := New(t)
	if err := c.CutOff(context.Background(), "127.0.0.91", 0, 7000); err == nil {
		t.Fatal("CutOff with gid 0 accepted: it would cut nothing outbound")
	}
}

func reach(t *testing.T, ctx context.Context, gid int, addr string, port int, want bool) {
	t.Helper()
	err := Dial(ctx, gid, addr, port, time.Second)
	if got := err == nil; got != want {
		t.Fatalf("dial %s:%d as gid %d: reachable %v (%v), want %v", addr, port, gid, got, err, want)
	}
	if !want && !errors.Is(err, ErrNoAnswer) { // a cut drops: no refusal comes back
		t.Fatalf("dial %s:%d as gid %d through a cut: %v, want %v", addr, port, gid, err, ErrNoAnswer)
	}
}

// A refused connection is not a cut: callers that verify a partition must not count it.
func TestDialRefusedIsNoTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	err = Dial(context.Background(), 0, "127.0.0.1", port, 5*time.Second)
	if err == nil || errors.Is(err, ErrNoAnswer) {
		t.Fatalf("dial a closed port: %v, want a refusal that is not %v", err, ErrNoAnswer)
	}
}

// listenPair listens on the same free port on both addresses, accepting and dropping.
func listenPair(t *testing.T, a, b string) int {
	t.Helper()
	for range 20 {
		la, err := net.Listen("tcp", a+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := la.Addr().(*net.TCPAddr).Port
		lb, err := net.Listen("tcp", net.JoinHostPort(b, strconv.Itoa(port)))
		if err != nil {
			la.Close()
			continue
		}
		for _, l := range []net.Listener{la, lb} {
			t.Cleanup(func() { l.Close() })
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
		}
		return port
	}
	t.Fatal("no port free on both addresses")
	return 0
}

// A cgroup left by a test process that was killed before its cleanup (its pid gone) is removed
// by the next CutProcess; one of a live process stays.
func TestOrphanCgroupsRemoved(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphan := fmt.Sprintf("%s/%s%d-1", cgroupRoot, cgroupPrefix, dead.Process.Pid)
	live := fmt.Sprintf("%s/%s%d-999", cgroupRoot, cgroupPrefix, os.Getpid())
	for _, dir := range []string{orphan, live} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatalf("needs cgroup v2 at %s and root: %v", cgroupRoot, err)
		}
		t.Cleanup(func() { _ = os.Remove(dir) })
	}
	removeOrphanCgroups()
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphan cgroup %s still there (%v)", orphan, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live process's cgroup %s was removed: %v", live, err)
	}
}

// Two local servers on one address and group (as mongods are) are cut apart from each other
// only: neither reaches the other's port, both stay reachable from this process, and one still
// reaches a third server. Healing restores the path; cleanup puts both back in their cgroup.
func TestCutBetweenCutsTwoServersApartOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pidA, portA := listener(t)
	pidB, portB := listener(t)
	third := listenPair(t, "127.0.0.1", "127.0.0.93")
	home, err := cgroupOf(pidA)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("cut", func(t *testing.T) {
		c := New(t)
		if err := c.CutBetween(ctx, t, pidA, portA, pidB, portB); err != nil {
			t.Fatal(err)
		}
		probe := func(from, port int, want bool) {
			t.Helper()
			err := c.DialFrom(ctx, from, "127.0.0.1", port, time.Second)
			if got := err == nil; got != want || (!want && !errors.Is(err, ErrNoAnswer)) {
				t.Fatalf("dial :%d from pid %d's cgroup: %v, want reachable %v", port, from, err, want)
			}
		}
		probe(pidA, portB, false)
		probe(pidB, portA, false)
		probe(pidA, third, true)
		reach(t, ctx, 0, "127.0.0.1", portA, true)
		reach(t, ctx, 0, "127.0.0.1", portB, true)
		if err := c.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		probe(pidA, portB, true)
		probe(pidB, portA, true)
	})
	if got, err := cgroupOf(pidA); err != nil || got != home {
		t.Errorf("after cleanup pid %d is in cgroup %q (%v), want %q", pidA, got, err, home)
	}
}

// listener starts a process (not this one: it is moved between cgroups) that accepts and
// drops connections on a free loopback port; it is killed in t.Cleanup.
func listener(t *testing.T) (pid, port int) {
	t.Helper()
	cmd := exec.Command("python3", "-c", `import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
while True:
    s.accept()[0].close()
`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("a listener needs python3: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	port, err = strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid, port
}
