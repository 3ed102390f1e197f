package snapshot

import (
	"context"
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
	source, target1, target3 *launcher.Shared
)

// stopCluster stops the cluster (once), logging its nodes' last lines if the test failed.
func stopCluster(t *testing.T, sh *launcher.Shared) {
	if sh.Err == nil && t.Failed() {
		sh.Cluster.LogTails(t)
	}
	sh.Stop()
}

func TestMain(m *testing.M) {
	if os.Getenv(killChildEnv) != "" {
		os.Exit(killChild())
	}
	code := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := func(nodes int, base string) *launcher.Shared {
			return launcher.StartForMain(ctx, launcher.Options{Nodes: nodes, BaseAddr: base})
		}
		var wg sync.WaitGroup
		wg.Add(3)
		go func() { defer wg.Done(); source = start(3, launcher.BackupSourceTestAddr) }()
		go func() { defer wg.Done(); target1 = start(1, launcher.BackupRestore1TestAddr) }()
		go func() { defer wg.Done(); target3 = start(3, launcher.BackupRestore3TestAddr) }()
		wg.Wait()
		defer func() {
			for _, sh := range []*launcher.Shared{source, target1, target3} {
				sh.Stop()
			}
		}()
		return m.Run()
	}()
	os.Exit(code)
}
