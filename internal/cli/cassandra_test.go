package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

func runCassandra(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRootCmd(IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	root.SetArgs(append([]string{"cassandra"}, args...))
	err := root.Execute()
	return out.String(), err
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

func TestCassandraDirFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SHARDMART_CASSANDRA_DIR", dir)
	_, err := runCassandra(t, "status")
	if !errors.Is(err, launcher.ErrNoCluster) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("status with SHARDMART_CASSANDRA_DIR=%s: %v", dir, err)
	}
}

func TestCassandraRepairRejectsBadSchedule(t *testing.T) {
	_, err := runCassandra(t, "repair", "--schedule", "every full moon", "--cassandra-dir", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "--schedule") {
		t.Fatalf("repair --schedule 'every full moon': %v, want a schedule error", err)
	}
}
