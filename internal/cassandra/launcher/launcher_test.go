package launcher

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestTokensSplitTheRingEvenly(t *testing.T) {
	cases := []struct {
		n    int
		want []string
	}{
		{1, []string{"-9223372036854775808"}},
		{3, []string{"-9223372036854775808", "-3074457345618258603", "3074457345618258602"}},
	}
	for _, tc := range cases {
		for i, want := range tc.want {
			if got := token(i, tc.n); got != want {
				t.Errorf("token(%d, %d) = %s, want %s", i, tc.n, got, want)
			}
		}
	}
}

func TestLayoutGivesDistinctAddressesAndJMXPorts(t *testing.T) {
	nodes, err := layout("/x", "127.0.0.21", []int{3})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		addr string
		jmx  int
	}{{"127.0.0.21", 7221}, {"127.0.0.22", 7222}, {"127.0.0.23", 7223}}
	for i, w := range want {
		if nodes[i].Addr != w.addr || nodes[i].JMXPort != w.jmx {
			t.Errorf("node %d = %s jmx %d, want %s jmx %d", i, nodes[i].Addr, nodes[i].JMXPort, w.addr, w.jmx)
		}
	}
	for _, bad := range []string{"10.0.0.1", "127.0.0.253", "::1", "x"} {
		if _, err := layout("/x", bad, []int{3}); err == nil {
			t.Errorf("layout(%q) accepted", bad)
		}
	}
}

func TestLayoutSpreadsNodesOverDataCentres(t *testing.T) {
	nodes, err := layout("/x", "127.0.0.131", []int{3, 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ addr, dc, token string }{
		{"127.0.0.131", "dc1", "-9223372036854775808"},
		{"127.0.0.132", "dc1", "-3074457345618258603"},
		{"127.0.0.133", "dc1", "3074457345618258602"},
		{"127.0.0.134", "dc2", "-9223372036854775807"},
	}
	if len(nodes) != len(want) {
		t.Fatalf("%d nodes, want %d", len(nodes), len(want))
	}
	for i, w := range want {
		if n := nodes[i]; n.Addr != w.addr || n.DC != w.dc || n.Token != w.token {
			t.Errorf("node %d = %s %s token %s, want %s %s token %s", i+1, n.Addr, n.DC, n.Token, w.addr, w.dc, w.token)
		}
	}
	c := &Cluster{nodes: nodes}
	if got, want := seeds(c), "127.0.0.131:7000,127.0.0.134:7000"; got != want {
		t.Errorf("seeds = %s, want %s (the first node of each DC)", got, want)
	}
	if got := rackDC(nodes[3]); got != "dc=dc2\nrack=rack1\n" {
		t.Errorf("rackdc of node 4 = %q", got)
	}
	one, err := layout("/x", "127.0.0.1", []int{3})
	if err != nil {
		t.Fatal(err)
	}
	if one[2].DC != "datacenter1" {
		t.Errorf("one-DC cluster's DC = %s, want datacenter1 (SimpleSnitch's name)", one[2].DC)
	}
}

func TestOptionsRejectBadDataCentresAndTLS(t *testing.T) {
	for _, o := range []Options{
		{Dir: "/x", DCNodes: []int{2, 0}},
		{Dir: "/x", DCNodes: []int{1, 1, 1, 1, 1}},
		{Dir: "/x", DCNodes: []int{2, 2}, Nodes: 3},
		{Dir: "/x", RequireClientCert: true},
		{Dir: "/x", UserTLS: &TLSFiles{CA: "/ca.pem"}},
		{Dir: "/x", UserTLS: &TLSFiles{Keystore: "/ks.pem", CA: "/ca.pem"}, RequireClientCert: true},
	} {
		if err := o.defaults(); err == nil {
			t.Errorf("Options %+v accepted", o)
		}
	}
	o := Options{Dir: "/x", DCNodes: []int{3, 1}}
	if err := o.defaults(); err != nil || o.Nodes != 4 {
		t.Errorf("DCNodes [3 1]: nodes %d, err %v; want 4 nodes", o.Nodes, err)
	}
}

func TestJavaMajor(t *testing.T) {
	cases := map[string]int{
		`openjdk version "17.0.15" 2025-04-15`: 17,
		`openjdk version "11.0.2" 2019-01-15`:  11,
		`java version "1.8.0_201"`:             8,
		`openjdk version "21" 2023-09-19`:      21,
	}
	for in, want := range cases {
		if got, ok := javaMajor(in); !ok || got != want {
			t.Errorf("javaMajor(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
}

func TestUpNormalParsesNodetoolStatus(t *testing.T) {
	out := `Datacenter: datacenter1
=======================
Status=Up/Down
|/ State=Normal/Leaving/Joining/Moving
--  Address     Load       Owns (effective)  Host ID                               Token                 Rack
UN  127.0.0.21  70.2 KiB   100.0%            1b0e...  -9223372036854775808  rack1
DN  127.0.0.22  65 KiB     100.0%            2c1f...  -3074457345618258603  rack1
UJ  127.0.0.23  65 KiB     100.0%            3d2a...  3074457345618258602   rack1
`
	up := upNormal(out)
	if !up["127.0.0.21"] || up["127.0.0.22"] || up["127.0.0.23"] || len(up) != 1 {
		t.Errorf("upNormal = %v, want only 127.0.0.21", up)
	}
}

// TestSingleNodeLifecycle boots a real node, reaches it over CQL and nodetool, stops it from a
// second Cluster value opened on the same directory (as `shardmart cassandra down` does from
// another process), and checks that no JVM is left.
func TestSingleNodeLifecycle(t *testing.T) {
	c := ForTest(t, Options{Nodes: 1, BaseAddr: LauncherTestAddr, Name: "launcher-test"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Logf("boot times: %v", c.BootTimes())

	if err := c.pingCQL(ctx, c.Hosts()[0]); err != nil {
		t.Fatalf("CQL after Up: %v", err)
	}
	out, err := c.Nodetool(ctx, 0, "status")
	if err != nil {
		t.Fatal(err)
	}
	if !upNormal(out)[LauncherTestAddr] {
		t.Fatalf("nodetool status does not show %s UN:\n%s", LauncherTestAddr, out)
	}
	pid, ok := c.livePID(c.nodes[0])
	if !ok {
		t.Fatal("pidfile does not name a live node JVM")
	}
	// One node, replication factor 1: repair has nothing to compare and must say so.
	if err := cqlExec(ctx, c.Hosts()[0], `CREATE KEYSPACE IF NOT EXISTS rf_one WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`,
		`CREATE TABLE IF NOT EXISTS rf_one.t (k text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if done, err := c.Repair(ctx, RepairOptions{Keyspace: "rf_one"}); !errors.Is(err, ErrSingleReplica) || done != nil {
		t.Errorf("repair at RF 1: got %v, %v; want ErrSingleReplica and nothing repaired", done, err)
	}

	other, err := Open(c.Dir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !other.Running(0) {
		t.Fatal("opened cluster does not see the running node")
	}
	if err := other.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		// Down waits for the JVM's last thread; our own child may still be a zombie until reaped.
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status"); err == nil && !strings.Contains(string(b), "zombie") {
			t.Fatalf("JVM %d still alive after Down", pid)
		}
	}
	if c.Running(0) {
		t.Fatal("node still reported running after Down")
	}
	if _, err := os.Stat(c.nodes[0].pidFile()); !os.IsNotExist(err) {
		t.Errorf("pidfile left behind: %v", err)
	}

	// A restart on the same data directory keeps the node's identity.
	if err := c.StartNode(ctx, 0); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := c.pingCQL(ctx, c.Hosts()[0]); err != nil {
		t.Fatalf("CQL after restart: %v", err)
	}
	t.Logf("boot times after restart: %v", c.BootTimes())
}

func TestOpenWithoutClusterFails(t *testing.T) {
	if _, err := Open(t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "cassandra up") {
		t.Fatalf("Open on an empty dir: %v, want ErrNoCluster", err)
	}
}

func TestSelectTablesSkipsSessionsAndEvents(t *testing.T) {
	all := []string{"carts", "cart_items", "order_history", "products", "products_by_category", "sessions", "user_sessions", "user_events"}
	got := strings.Join(selectTables(all, DefaultRepairSkip), ",")
	want := "carts,cart_items,order_history,products,products_by_category"
	if got != want {
		t.Errorf("selectTables = %s, want %s", got, want)
	}
}

// Without Java the launcher fails with the install command; tests built on it fail, not skip.
func TestMissingJavaIsAPrerequisiteError(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := CheckPrerequisites(context.Background())
	if !errors.Is(err, ErrPrerequisite) || !strings.Contains(err.Error(), "apt-get install -y openjdk-17-jre-headless maven") {
		t.Fatalf("CheckPrerequisites without java = %v, want ErrPrerequisite naming the install command", err)
	}
}

// cqlExec runs statements on addr alone.
func cqlExec(ctx context.Context, addr string, stmts ...string) error {
	s, err := (&Cluster{}).singleHostSession(addr)
	if err != nil {
		return err
	}
	defer s.Close()
	for _, q := range stmts {
		if err := s.Query(q).ExecContext(ctx); err != nil {
			return err
		}
	}
	return nil
}
