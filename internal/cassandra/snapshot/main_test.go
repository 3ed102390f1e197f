package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// Three real clusters, started together by TestMain: the 3-node source (RF 3) the backups are
// taken of, a 1-node and a fresh 3-node cluster the restores load into. Each is stopped as
// soon as the tests that use it are done (stopCluster), so the package's JVMs do not outlive
// their part of the run. A start that fails fails the tests that need it, with the reason.
var (
	source, target1, target3 *testCluster
)

type testCluster struct {
	c    *launcher.Cluster
	err  error
	stop func()
	once sync.Once
}

// need returns the cluster or fails the test with why it did not start.
func (tc *testCluster) need(t *testing.T) *launcher.Cluster {
	t.Helper()
	if tc.err != nil {
		if errors.Is(tc.err, launcher.ErrPrerequisite) {
			t.Fatalf("Cassandra tests need Java 17 and Maven: %v", tc.err)
		}
		t.Fatalf("cluster did not start: %v", tc.err)
	}
	return tc.c
}

// stopCluster stops the cluster (once), logging its nodes' last lines if the test failed.
func (tc *testCluster) stopCluster(t *testing.T) {
	if tc.stop == nil {
		return
	}
	if t.Failed() {
		tc.c.LogTails(t)
	}
	tc.once.Do(tc.stop)
}

func TestMain(m *testing.M) {
	if os.Getenv(killChildEnv) != "" {
		os.Exit(killChild())
	}
	code := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := func(nodes int, base string) *testCluster {
			c, stop, err := launcher.StartShared(ctx, launcher.Options{Nodes: nodes, BaseAddr: base, C1Only: true})
			if err != nil {
				err = fmt.Errorf("start a %d-node Cassandra on %s with the launcher: %w", nodes, base, err)
			}
			return &testCluster{c: c, err: err, stop: stop}
		}
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { defer wg.Done(); source = start(3, launcher.BackupSourceTestAddr) }()
		go func() { defer wg.Done(); target1 = start(1, launcher.BackupRestore1TestAddr) }()
		go func() { defer wg.Done(); target3 = start(3, launcher.BackupRestore3TestAddr) }()
		wg.Wait()
		defer func() {
			for _, tc := range []*testCluster{source, target1, target3} {
				if tc.stop != nil {
					tc.once.Do(tc.stop)
				}
			}
		}()
		return m.Run()
	}()
	os.Exit(code)
}
