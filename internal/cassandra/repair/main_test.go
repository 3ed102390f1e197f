package repair

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// The cluster tests run the repairer against a real three-node Cassandra 5.0.8 cluster that
// TestMain starts with the project's launcher on launcher.RepairTestAddr (127.0.0.191-193),
// through the real nodetool over JMX. Each test repairs its own RF 3 keyspace, which also
// all share one state keyspace (stateKS, its tables created once): the tests run one after
// another, so each test's repairer takes the lease its predecessor gave back (or, after the
// kill test, the one a dead process left).
var (
	testCluster  *launcher.Cluster
	testSession  *gocql.Session
	testNodetool *JVMNodetool
	testSetupErr error
)

// stateKS holds the repair state of every test (RF 3).
const stateKS = "rt_state"

// childEnv makes the test binary a repairer process (the kill-and-resume test's subprocess).
const childEnv = "REPAIRTEST_CHILD_KEYSPACE"

func TestMain(m *testing.M) {
	if ks := os.Getenv(childEnv); ks != "" {
		os.Exit(runChild(ks))
	}
	code := m.Run()
	if stopCluster != nil {
		stopCluster()
	}
	os.Exit(code)
}

var (
	startOnce   sync.Once
	stopCluster func()
)

// cluster starts the package's cluster on first use (the unit tests need none) and fails the
// test when it could not start.
func cluster(t *testing.T) *launcher.Cluster {
	t.Helper()
	startOnce.Do(func() { testSetupErr = startCluster() })
	if testSetupErr != nil {
		t.Fatal(testSetupErr)
	}
	return testCluster
}

func startCluster() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	shared := launcher.StartForMain(ctx, launcher.Options{Nodes: 3, BaseAddr: launcher.RepairTestAddr,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if shared.Err != nil {
		return shared.Err
	}
	var closers []func()
	stopCluster = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		shared.Stop()
	}
	c := shared.Cluster
	testCluster = c
	var err error
	testSession, err = cassandrastore.OpenSession(ctx, cassandrastore.Config{Hosts: c.Hosts(), Keyspace: "-"})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	closers = append(closers, testSession.Close)
	testNodetool, err = NewJVMNodetool(ctx, JVMOptions{
		// The launcher's nodes have no JMX login: this proves the password file does not
		// stand in the way (nodetool sends the credentials, the server ignores them).
		Credentials: Credentials{User: "repair", Password: "not checked"}})
	if err != nil {
		return fmt.Errorf("nodetool: %w", err)
	}
	closers = append(closers, testNodetool.Close)
	// Every keyspace up front, while all nodes are up: a schema change right after the
	// tombstone test restarts a node took longer than the driver's 6 s.
	stmts := []string{"CREATE KEYSPACE IF NOT EXISTS " + stateKS + " WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 3}"}
	for _, ks := range testKeyspaces {
		stmts = append(stmts,
			"CREATE KEYSPACE IF NOT EXISTS "+ks+" WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 3}",
			"CREATE TABLE IF NOT EXISTS "+ks+".t (k int PRIMARY KEY, v text)")
	}
	// user_events: the table DefaultSkip leaves out, in the full run's keyspace.
	stmts = append(stmts, "CREATE TABLE IF NOT EXISTS rt_full.user_events (k int PRIMARY KEY, v text)")
	for _, q := range stmts {
		if err := ddl(ctx, q); err != nil {
			return err
		}
	}
	return NewStore(testSession, stateKS).EnsureTables(ctx)
}

// testKeyspaces are the tests' keyspaces, one per test.
var testKeyspaces = []string{"rt_full", "rt_kill", "rt_frozen", "rt_ctl", "rt_tomb"}

// ddl runs an idempotent schema statement, again after a timeout of a loaded node.
func ddl(ctx context.Context, q string) error {
	var err error
	for range 3 {
		if err = testSession.Query(q).WithContext(ctx).Exec(); err == nil {
			return nil
		}
	}
	return fmt.Errorf("%s: %w", q, err)
}

// testTargets reach every node's JMX on 127.0.0.1 (the launcher's JMX is local only).
func testTargets(c *launcher.Cluster) []Target {
	var ts []Target
	for _, n := range c.Nodes() {
		ts = append(ts, Target{Node: n.Addr, Host: "127.0.0.1", Port: n.JMXPort})
	}
	return ts
}

// makeKeyspace writes rows rows at ALL into ks.t (the keyspaces are made by startCluster).
func makeKeyspace(t *testing.T, ks string, rows int) {
	t.Helper()
	if !slices.Contains(testKeyspaces, ks) {
		t.Fatalf("keyspace %s is not in testKeyspaces", ks)
	}
	for i := range rows {
		if err := testSession.Query("INSERT INTO "+ks+".t (k, v) VALUES (?, ?)", i, strings.Repeat("x", 100)).
			Consistency(gocql.All).WithContext(context.Background()).Exec(); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
}

// testOptions are small and fast: 6 segments, short timeouts and backoff.
func testOptions(ks string) Options {
	return Options{Keyspace: ks, Skip: DefaultSkip, Segments: 6, SegmentTimeout: 30 * time.Second, MaxAttempts: 3,
		Backoff: time.Second, LeaseTTL: 15 * time.Second, Poll: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func newRepairer(t *testing.T, o Options) *Repairer {
	t.Helper()
	r, err := New(testSession, NewStore(testSession, stateKS), testNodetool, testTargets(testCluster), o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runChild is the subprocess: one repair run of keyspace ks, slowed by intensity 0.5.
func runChild(ks string) int {
	ctx := context.Background()
	c, err := launcher.Open(os.Getenv("REPAIRTEST_CLUSTER_DIR"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := cassandrastore.OpenSession(ctx, cassandrastore.Config{Hosts: c.Hosts(), Keyspace: "-"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer s.Close()
	nt, err := NewJVMNodetool(ctx, JVMOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer nt.Close()
	o := testOptions(ks)
	o.Intensity = 0.5
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	r, err := New(s, NewStore(s, stateKS), nt, testTargets(c), o)
	if err == nil {
		_, err = r.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// segmentsOf reads the newest run of keyspace ks and its segments.
func segmentsOf(t *testing.T, ks string) (RunInfo, []SegmentState) {
	t.Helper()
	st := NewStore(testSession, stateKS)
	runs, err := st.Runs(context.Background())
	if err != nil {
		return RunInfo{}, nil
	}
	for _, r := range runs {
		if r.Keyspace != ks {
			continue
		}
		segs, err := st.Segments(context.Background(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r, segs
	}
	return RunInfo{}, nil
}

func count(segs []SegmentState, state string) int {
	n := 0
	for _, s := range segs {
		if s.State == state {
			n++
		}
	}
	return n
}
