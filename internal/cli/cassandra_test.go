package cli

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

func runCassandra(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, _, err := execRoot(t, append([]string{"cassandra"}, args...)...)
	return out, err
}

// The cluster lifecycle itself is tested against real JVMs in internal/cassandra/launcher and
// faulttest; these cover the command surface without starting Cassandra.

func TestCassandraCommandsWithoutClusterSayHowToStartOne(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"status"}, {"repair"}, {"nodetool", "--", "status"}} {
		_, err := runCassandra(t, append(args, "--cassandra-dir", dir)...)
		if !errors.Is(err, launcher.ErrNoCluster) {
			t.Errorf("cassandra %v without a cluster: %v, want ErrNoCluster", args, err)
		}
	}
	out, err := runCassandra(t, "down", "--cassandra-dir", dir)
	if err != nil || !strings.Contains(out, "no cluster to stop") {
		t.Errorf("down without a cluster: %q, %v; want a no-op", out, err)
	}
}

func TestCassandraUpRejectsOtherNodeCounts(t *testing.T) {
	_, err := runCassandra(t, "up", "--nodes", "2", "--cassandra-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "want 1 or 3") {
		t.Fatalf("up --nodes 2: %v, want a rejection", err)
	}
}

// --cassandra-dir is the local launcher's, not a deployment setting: flag only.
func TestCassandraDirIgnoresEnvironment(t *testing.T) {
	t.Setenv("SHARDMART_CASSANDRA_DIR", t.TempDir())
	for _, args := range [][]string{{"status"}, {"status", "--cassandra-dir", "flag-dir"}} {
		var got cassandraStatusOptions
		cl := &cassandraClusterOptions{}
		root := newRootCmd(IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
		root.AddCommand(newCassandraGroup(cl, newCmdCassandraStatus(IO{}, cl, func(_ context.Context, o cassandraStatusOptions) error { got = o; return nil })))
		root.SetArgs(append([]string{"cassandra"}, args...))
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		want := defaultCassandraDir
		if len(args) > 1 {
			want = args[2]
		}
		if got.Cluster.Dir != want {
			t.Errorf("cassandra %v with SHARDMART_CASSANDRA_DIR set: dir %q, want %q", args, got.Cluster.Dir, want)
		}
	}
}

func TestCassandraRepairRejectsBadSchedule(t *testing.T) {
	_, err := runCassandra(t, "repair", "--schedule", "every full moon", "--cassandra-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--schedule") {
		t.Fatalf("repair --schedule 'every full moon': %v, want a schedule error", err)
	}
}

func TestCassandraUpDataCentreFlags(t *testing.T) {
	run := func(args ...string) (cassandraUpOptions, error) {
		var got cassandraUpOptions
		cl := &cassandraClusterOptions{}
		root := newRootCmd(IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
		root.AddCommand(newCassandraGroup(cl, newCmdCassandraUp(IO{}, cl, func(_ context.Context, o cassandraUpOptions) error { got = o; return nil })))
		root.SetArgs(append([]string{"cassandra", "up"}, args...))
		return got, root.Execute()
	}
	got, err := run("--dcs", "2", "--nodes-per-dc", "2", "--auth", "--tls")
	if err != nil || len(got.NodesPerDC) != 2 || got.NodesPerDC[0] != 2 || got.NodesPerDC[1] != 2 || !got.Auth || !got.TLS {
		t.Errorf("--dcs 2 --nodes-per-dc 2: %+v, %v; want 2 DCs of 2 nodes with auth and TLS", got, err)
	}
	if got, err := run("--dcs", "2", "--nodes-per-dc", "3,1"); err != nil || got.NodesPerDC[0] != 3 || got.NodesPerDC[1] != 1 {
		t.Errorf("--nodes-per-dc 3,1: %+v, %v", got.NodesPerDC, err)
	}
	for _, bad := range [][]string{
		{"--dcs", "2", "--nodes-per-dc", "4"},
		{"--dcs", "2", "--nodes-per-dc", "1,1,1"},
		{"--dcs", "2", "--nodes", "3"},
		{"--tls-keystore", "/k.pem"},
	} {
		if _, err := run(bad...); err == nil {
			t.Errorf("cassandra up %v accepted", bad)
		}
	}
}
