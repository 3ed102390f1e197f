package cassandrastore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// The tests run against a real one-node cluster that TestMain starts with the project's
// launcher on launcher.ContractTestAddr (127.0.0.10), so they can run next to the fault tests'
// cluster and a developer's `shardmart cassandra up`. SHARDMART_CASSANDRA_TEST_HOSTS points
// them at a running cluster instead (a fresh keyspace is created and dropped). If the
// cluster cannot start, every test fails with the reason: nothing is skipped or faked.
var (
	testHosts    []string
	testKeyspace string
	testStore    *Store
	testSetupErr error
	testBoot     time.Duration
	testFailed   bool
)

func TestMain(m *testing.M) {
	code := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		if env := os.Getenv("SHARDMART_CASSANDRA_TEST_HOSTS"); env != "" {
			testHosts = strings.Split(env, ",")
		} else {
			shared := launcher.StartForMain(ctx, launcher.Options{Nodes: 1, BaseAddr: launcher.ContractTestAddr, HeapMB: 768})
			defer shared.Stop()
			if testSetupErr = shared.Err; testSetupErr != nil {
				return m.Run()
			}
			defer func() { logTail(shared.Cluster) }()
			testHosts = shared.Cluster.Hosts()
		}
		var b [4]byte
		_, _ = rand.Read(b[:])
		testKeyspace = "contract_" + hex.EncodeToString(b[:])
		if _, err := ApplySchema(ctx, testHosts, SchemaOptions{Keyspace: testKeyspace, RF: 1}); err != nil {
			testSetupErr = fmt.Errorf("apply schema: %w", err)
			return m.Run()
		}
		testStore, testSetupErr = Open(ctx, Config{Hosts: testHosts, Keyspace: testKeyspace})
		if testSetupErr != nil {
			return m.Run()
		}
		testBoot = time.Since(start)
		fmt.Fprintf(os.Stderr, "cassandra tests: cluster %s ready, keyspace %s, in %s\n", strings.Join(testHosts, ","), testKeyspace, testBoot.Round(time.Millisecond))
		code := m.Run()
		testFailed = code != 0
		_ = testStore.Session().Query("DROP KEYSPACE IF EXISTS " + testKeyspace).Exec()
		testStore.Close()
		return code
	}()
	os.Exit(code)
}

// logTail prints the end of the node's log when a test failed: the cluster directory is
// removed when the binary ends, and a node that died mid-run says why only there.
func logTail(c *launcher.Cluster) {
	if !testFailed {
		return
	}
	for _, n := range c.Nodes() {
		b, err := os.ReadFile(n.SystemLog())
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		fmt.Fprintf(os.Stderr, "--- cassandra node %s log (last lines):\n%s\n", n.Addr, strings.Join(lines, "\n"))
	}
}

// store returns the shared store, failing the test with the setup error if there is none.
func store(t testing.TB) *Store {
	t.Helper()
	if testSetupErr != nil {
		t.Fatalf("Cassandra unavailable: %v", testSetupErr)
	}
	return testStore
}
