package cassandracollect

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// The tests scrape a real two-node Cassandra 5.0.8 cluster that TestMain starts with the
// project's launcher on launcher.MonitorTestAddr (127.0.0.41-42), after writing a skewed
// workload: one big partition in an RF 1 keyspace, on one node only, plus small partitions
// spread over both. If the cluster cannot start, every test fails with the reason.
const (
	skewKeyspace = "monitor_skew" // SimpleStrategy RF 1
	skewTable    = "big"
	rf2Keyspace  = "monitor_rf2" // SimpleStrategy RF 2: the hints test writes here
	hotKey       = "hot"
	hotRows      = 48
	hotRowBytes  = 128 << 10
	hotBytes     = hotRows * hotRowBytes // 6 MiB of random payload in one partition
)

var (
	testCluster  *launcher.Cluster
	testSetupErr error
	ownerIdx     int // node holding the hot partition
)

func TestMain(m *testing.M) {
	code := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		shared := launcher.StartForMain(ctx, launcher.Options{Nodes: 2, BaseAddr: launcher.MonitorTestAddr, HeapMB: 512})
		defer shared.Stop()
		testCluster, testSetupErr = shared.Cluster, shared.Err
		if testSetupErr == nil {
			testSetupErr = writeSkew(ctx, testCluster)
		}
		return m.Run()
	}()
	os.Exit(code)
}

// writeSkew writes the big partition and the small ones, reads the big one (so read
// latency is well above 1 ms), flushes both nodes (max_partition_size and load only count
// SSTables) and finds the big partition's owner with nodetool getendpoints.
func writeSkew(ctx context.Context, c *launcher.Cluster) error {
	cfg := gocql.NewCluster(c.Hosts()...)
	cfg.Timeout = 20 * time.Second
	cfg.Logger = gocql.NewLogger(gocql.LogLevelNone)
	s, err := cfg.CreateSession()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer s.Close()
	for _, q := range []string{
		"CREATE KEYSPACE " + skewKeyspace + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"CREATE TABLE " + skewKeyspace + "." + skewTable + " (pk text, ck int, v blob, PRIMARY KEY (pk, ck))",
		"CREATE KEYSPACE " + rf2Keyspace + " WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}",
		"CREATE TABLE " + rf2Keyspace + ".h (k int PRIMARY KEY, v text)",
	} {
		if err := s.Query(q).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	insert := "INSERT INTO " + skewKeyspace + "." + skewTable + " (pk, ck, v) VALUES (?, ?, ?)"
	for i := range hotRows {
		blob := make([]byte, hotRowBytes)
		_, _ = rand.Read(blob) // incompressible, so bytes on disk match bytes written
		if err := s.Query(insert, hotKey, i, blob).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("write the big partition: %w", err)
		}
	}
	if err := exerciseSkew(ctx, s); err != nil {
		return err
	}
	for i := range c.Nodes() {
		if _, err := c.Nodetool(ctx, i, "flush", skewKeyspace); err != nil {
			return err
		}
	}
	out, err := c.Nodetool(ctx, 0, "getendpoints", skewKeyspace, skewTable, hotKey)
	if err != nil {
		return err
	}
	owner := strings.TrimSpace(out)
	ownerIdx = -1
	for i, h := range c.Hosts() {
		if h == owner {
			ownerIdx = i
		}
	}
	if ownerIdx < 0 {
		return fmt.Errorf("getendpoints answered %q, not one of %v", owner, c.Hosts())
	}
	return nil
}

// exerciseSkew (re)writes the small partitions and reads the big one, so every node has
// write and read latency on the skewed table; a restarted node starts with empty histograms.
func exerciseSkew(ctx context.Context, s *gocql.Session) error {
	insert := "INSERT INTO " + skewKeyspace + "." + skewTable + " (pk, ck, v) VALUES (?, ?, ?)"
	for i := range 200 {
		if err := s.Query(insert, fmt.Sprintf("cold-%d", i), 0, []byte("small")).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("write small partitions: %w", err)
		}
	}
	for range 5 {
		iter := s.Query("SELECT v FROM "+skewKeyspace+"."+skewTable+" WHERE pk = ?", hotKey).WithContext(ctx).Iter()
		var v []byte
		for iter.Scan(&v) {
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("read the big partition: %w", err)
		}
	}
	return nil
}

func cluster(t *testing.T) *launcher.Cluster {
	t.Helper()
	if testSetupErr != nil {
		t.Fatal(testSetupErr)
	}
	return testCluster
}
