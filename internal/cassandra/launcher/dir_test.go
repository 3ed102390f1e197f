package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// A directory holding a one-node cluster is refused for a cluster of another size or base
// address, at once; DownDir stops its node; and a node that dies while starting (Cassandra
// refuses a cluster name other than the one its system tables hold) fails Up at once with
// the ERROR line it logged.
func TestDirectoryOfAnotherClusterIsRefusedAndADyingNodeReported(t *testing.T) {
	dir := t.TempDir()
	c := ForTest(t, Options{Dir: dir, Nodes: 1, BaseAddr: LauncherTestAddr, Name: "launcher-a"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, o := range []Options{{Nodes: 3, BaseAddr: LauncherTestAddr}, {Nodes: 1, BaseAddr: "127.0.0.32"}} {
		o.Dir, o.Name, o.DieWithParent = dir, "launcher-a", true
		other, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(other.KillAll)
		err = other.Up(ctx)
		if !errors.Is(err, ErrOtherTopology) || !strings.Contains(err.Error(), dir+" holds a 1-node cluster from "+LauncherTestAddr) {
			t.Errorf("Up of %d node(s) from %s: %v; want ErrOtherTopology saying what %s holds", o.Nodes, o.BaseAddr, err, dir)
		}
	}

	pid, ok := c.livePID(c.nodes[0])
	if !ok {
		t.Fatal("the node has no live pidfile")
	}
	got, others, err := DownDir(ctx, dir, nil)
	if err != nil || got == nil || others != 0 {
		t.Fatalf("DownDir = %v, %d, %v; want the cluster and no other node", got, others, err)
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("JVM %d still exists after DownDir", pid)
		}
	}

	renamed, err := New(Options{Dir: dir, Nodes: 1, BaseAddr: LauncherTestAddr, Name: "launcher-b", DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(renamed.KillAll)
	// The JVM's own startup, until Cassandra checks the saved name, took up to about 2 minutes
	// here under load averages of 60-70: the test asserts what Up says, not how fast.
	err = renamed.Up(ctx)
	t.Logf("Up as launcher-b: %v", err)
	if !errors.Is(err, serverproc.ErrExited) || !strings.Contains(err.Error(), "node 1 ("+LauncherTestAddr+"), while starting (exit status") ||
		!strings.Contains(err.Error(), "Saved cluster name launcher-a != configured name launcher-b") {
		t.Fatalf("Up under another cluster name: %v; want ErrExited with Cassandra's ERROR line", err)
	}
}

// A plain start on a directory of a cluster with login and TLS is refused before anything
// runs, and the state file keeps the settings.
func TestDirectoryWithLoginAndTLSRefusesAPlainStart(t *testing.T) {
	dir := t.TempDir()
	held := state{Nodes: 1, BaseAddr: LauncherTestAddr, Name: "launcher-a", Auth: true, TLS: true}
	b, err := json.Marshal(held)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stateFile(dir), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{}, {Auth: true}, {Auth: true, TLS: true, RequireClientCert: true}} {
		o.Dir, o.Nodes, o.BaseAddr, o.Name = dir, 1, LauncherTestAddr, "launcher-a"
		c, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		err = c.prepare(context.Background())
		if !errors.Is(err, ErrOtherTopology) || !strings.Contains(err.Error(), "holds a cluster with --auth --tls") {
			t.Errorf("Auth %v TLS %v client cert %v: %v; want ErrOtherTopology naming --auth --tls", o.Auth, o.TLS, o.RequireClientCert, err)
		}
	}
	got, err := readState(dir)
	if err != nil || !got.Auth || !got.TLS {
		t.Errorf("state after the refused starts: %+v, %v", got, err)
	}
}
