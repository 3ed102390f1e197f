package launcher

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// Port ranges reserved for test sets, so test packages that `go test ./...` runs in parallel,
// and a developer's `shardmart mongo up` on 27017, never share a port.
const (
	UserPort         = 27017 // `shardmart mongo up`
	ContractTestPort = 27100 // internal/store/mongostore contract tests and benchmarks, 1 member
	FaultTestPort    = 27110 // internal/mongodb/faulttest, 3 members
	LauncherTestPort = 27120 // this package's own tests
	RoutingTestPort  = 27130 // internal/readrouting live lag tests, 3 members
	// RoutingClusterTestPort: internal/readrouting's sharded cluster (config server 27140, two
	// 3-member shards from 27150 and 27160).
	RoutingClusterTestPort = 27140
	ShardedTestPort        = 27200 // sharded test clusters (config server and shards)
	ShardingTestPort       = 27400 // internal/sharding's live cluster (config server and 3 shards)
	ServeTestPort          = 27300 // the CLI's serve-on-MongoDB test
	MonitorTestPort        = 27500 // internal/monitor/mongocollect's live cluster (config server and 2 shards)
	AlertingTestPort       = 27650 // deploy/monitoring's end-to-end alert test (config server and 2 shards)
	MonitorPageTestPort    = 27800 // internal/monitor's page and browser tests (config server and 2 shards); not 277xx: hand-started sets use 27720
	MigrateTestPort        = 27900 // internal/migrate's MongoDB source tests, 1 member
	MigrateLiveTestPort    = 27910 // internal/cli's migration of a live MongoDB shop, 1 member
	// LauncherClusterTestPort: this package's own sharded cluster (config server 27560, shards
	// from 27570), next to sets on LauncherTestPort.
	LauncherClusterTestPort = 27560
	ScaleOutTestPort        = 27950 // internal/testkit/scaleout: three serve processes on one replica set, 1 member
	// AdviseTestPort: internal/advise/live's sharded cluster (config server 28000, three shards
	// from 28010); 1-member sets at AdviseTestPort+80 (with access control, the missing-role
	// refusal), +90 (the profiler and refusal tests) and +95 (internal/cli's `advise --from`).
	AdviseTestPort   = 28000
	AuthTestPort     = 27970 // this package's set with a keyFile, an admin user and TLS, 3 members
	AuthShopTestPort = 27975 // internal/store/mongostore's least-privilege shop over TLS, 1 member
	AuthCLITestPort  = 27985 // internal/cli's `mongo up --auth --tls` and `mongo users`, 1 member
	// AuthClusterTestPort: internal/monitor/mongocollect's cluster with a keyFile and TLS
	// (config server 28100, one shard from 28110).
	AuthClusterTestPort = 28100
	// AuthCLIClusterTestPort: internal/cli's `mongo up --shards 1 --auth --tls` (config server
	// 28120, shard 28130).
	AuthCLIClusterTestPort = 28120
	RobustnessTestPort     = 28200 // internal/testkit/robustness: process nemeses against a 3-member set (28200-28202)
	// RobustnessPartitionTestPort: internal/testkit/robustness, network nemeses against a second
	// 3-member set (28210-28212).
	RobustnessPartitionTestPort = 28210
	// RobustnessClusterTestPort: internal/testkit/robustness's router-less sharded cluster (config server
	// 28300, shards from 28310).
	RobustnessClusterTestPort = 28300
	// BackupTestPort: internal/mongodb/dump's drill, a 3-member source set (27600-27602) and a
	// 1-member restore target (27610). Not 27500, which MonitorTestPort's cluster holds.
	BackupTestPort = 27600
	// BackupClusterTestPort: internal/mongodb/dump's router-less sharded cluster (config server
	// 27620, shards 27630 and 27640).
	BackupClusterTestPort = 27620
	// MoveTestPort: internal/cli's move of the embedded shop's orders family to MongoDB behind
	// a write freeze, a 3-member set (28400-28402).
	MoveTestPort = 28400
	// MoveClusterTestPort: the moved collections sharded on a router-less cluster (config
	// server 28420, shards from 28430).
	MoveClusterTestPort = 28420
	// MigrateDualTestPort: internal/cli's `migrate --to mongo` of a live embedded shop, a
	// 3-member set (28450-28452).
	MigrateDualTestPort = 28450
	// BenchSmokePort: the set `shardmart bench --placement mongo` is tried against by hand
	// while bench itself changes (docs/evidence/benchmarks.md), 1 member.
	BenchSmokePort = 28500
	// RequestBenchPort: the hand-started 1-member set the request benchmarks of
	// internal/store/mongostore ran on, both binaries of an A/B against one server
	// (docs/evidence/mongodb.md).
	RequestBenchPort = 28560
)

// FastFailoverParameters are the server parameters that shorten a failover after a primary
// freezes or is cut off (docs/mongodb.md "Production settings", where their costs are): a
// secondary gives up a sync source that stopped answering after one network timeout, and that
// timeout is the oplog query's await time plus 1 s instead of plus 5 s.
var FastFailoverParameters = []string{
	"--setParameter", "oplogFetcherSteadyStateMaxFetcherRestarts=0",
	"--setParameter", "oplogNetworkTimeoutBufferSeconds=1",
}

// StartShared starts a set for a whole test binary, typically from TestMain, and returns stop,
// which must run after m.Run. Every mongod dies with the test binary (DieWithParent), whatever
// kills it; a cross-process lock on the port range makes a second test binary wanting the same
// ports wait instead of clash. With an empty opts.Dir a temporary directory is used and removed
// by stop.
func StartShared(ctx context.Context, opts Options) (s *Set, stop func(), err error) {
	opts.DieWithParent = true
	return serverproc.StartShared(ctx, "mongod", opts.Dir, portLock(opts.BasePort), func(dir string) (*Set, error) {
		opts.Dir = dir
		return New(opts)
	})
}

// portLock names the cross-process lock of a test port range (UserPort when 0).
func portLock(port int) string {
	if port == 0 {
		port = UserPort
	}
	return "shardmart-mongod-" + strconv.Itoa(port) + ".lock"
}

// ForTest starts a set for one test and stops it in t.Cleanup, even when the test fails or
// panics. A missing python3/pip fails the test (never a skip) with the install command.
func ForTest(t serverproc.TB, opts Options) *Set {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	start := func(ctx context.Context) (*Set, func(), error) { return StartShared(ctx, opts) }
	return serverproc.ForTest(t, 5*time.Minute, start, ErrPrerequisite, "MongoDB tests need python3 with pip",
		func(s *Set) {
			for i := range s.Members() {
				t.Logf("member %d:\n%s", i, s.LogTail(i))
			}
		})
}

// StartSharedCluster starts a sharded cluster (config server and shards, no router) for a whole
// test binary, typically on first use, and returns stop, which must run after m.Run. Like
// StartShared, every mongod dies with the test binary and a lock on the base port makes another
// binary wanting the same ports wait. With an empty opts.Dir a temporary directory is used and
// removed by stop.
func StartSharedCluster(ctx context.Context, opts ClusterOptions) (c *Cluster, stop func(), err error) {
	opts.DieWithParent = true
	if opts.BasePort == 0 {
		opts.BasePort = ShardedTestPort
	}
	return serverproc.StartShared(ctx, "cluster", opts.Dir, portLock(opts.BasePort), func(dir string) (*Cluster, error) {
		opts.Dir = dir
		return NewCluster(opts)
	})
}

// ClusterForTest starts a sharded cluster (config server and shards, no router) for one test
// and SIGKILLs it in t.Cleanup, even when the test fails. Clusters on one BasePort take turns.
func ClusterForTest(t serverproc.TB, opts ClusterOptions) *Cluster {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, stop, err := StartSharedCluster(ctx, opts)
	if err != nil {
		if errors.Is(err, ErrPrerequisite) {
			t.Fatalf("MongoDB tests need python3 with pip: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range c.sets() {
				t.Logf("%s member 0:\n%s", s.Name(), s.LogTail(0))
			}
		}
		stop()
	})
	return c
}
