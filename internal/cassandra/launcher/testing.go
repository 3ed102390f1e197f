package launcher

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// Base addresses reserved for test clusters, so test packages that `go test ./...` runs in
// parallel, and a developer's `shardmart cassandra up` cluster on 127.0.0.1-3, never share
// an address or a JMX port (7200 + last octet).
const (
	UserAddr         = "127.0.0.1"  // `shardmart cassandra up`, nodes .1-.3
	ContractTestAddr = "127.0.0.10" // internal/store/cassandrastore contract tests, 1 node
	FaultTestAddr    = "127.0.0.21" // fault tests, nodes .21-.23
	LauncherTestAddr = "127.0.0.31" // this package's own tests
	MonitorTestAddr  = "127.0.0.41" // internal/monitor/cassandracollect, nodes .41-.42
	AlertingTestAddr = "127.0.0.51" // deploy/monitoring's end-to-end alert test, nodes .51-.52
	MigrateTestAddr  = "127.0.0.61" // internal/migrate's backfill tests, 1 node
	BenchTestAddr    = "127.0.0.71" // internal/migrate's backfill-vs-DSBulk benchmark, 1 node
	// MigrateLiveTestAddr: internal/cli's migrations of a live shop, 1 node (.81) and 3 nodes (.82-.84).
	MigrateLiveTestAddr  = "127.0.0.81"
	MigrateLive3TestAddr = "127.0.0.82"
	DualWriteTestAddr    = "127.0.0.91" // internal/placement's dual-write tests, 1 node
	// PolicyTestAddr: internal/store/cassandrastore's client-policy tests, 2 nodes (.121-.122).
	PolicyTestAddr   = "127.0.0.121"
	ScaleOutTestAddr = "127.0.0.111" // internal/testkit/scaleout: three serve processes on a hybrid placement, 1 node
	// TwoDCTestAddr: internal/testkit/twodc, two data centres (dc1 .131-.133, dc2 .134) with
	// login and TLS; .131-.136 reserved.
	TwoDCTestAddr = "127.0.0.131"
	// RobustnessTestAddr: internal/testkit/robustness, nemeses and recorded histories against 3 nodes
	// (.151-.153).
	RobustnessTestAddr = "127.0.0.151"
	// RepairTestAddr: internal/cassandra/repair, the repairer against 3 nodes (.191-.193).
	RepairTestAddr = "127.0.0.191"
	// CartModelTestAddr: internal/store/cassandrastore's cart histories checked against a
	// model, 3 nodes (.211-.213; .215 reserved for a 1-node cluster of the same tests).
	CartModelTestAddr = "127.0.0.211"
	// Backup tests (internal/cassandra/snapshot): the 3-node source (.171-.173), a 1-node
	// restore target (.175) and a fresh 3-node restore target (.181-.183).
	BackupSourceTestAddr   = "127.0.0.171"
	BackupRestore1TestAddr = "127.0.0.175"
	BackupRestore3TestAddr = "127.0.0.181"
	// BenchSmokeAddr: the node `shardmart bench --placement cassandra` is tried against by
	// hand while bench itself changes (docs/evidence/benchmarks.md), 1 node.
	BenchSmokeAddr = "127.0.0.201"
	// CDSTrainAddr: the one-node training run that makes the class-data sharing archive
	// (EnsureCDS), once per machine; CDSTestTrainAddr: this package's test of that run.
	// SizingBenchAddr: this package's benchmark of the small-host sizing and the client's write
	// coalescing, one node at a time.
	SizingBenchAddr  = "127.0.0.221"
	CDSTrainAddr     = "127.0.0.250"
	CDSTestTrainAddr = "127.0.0.33"
)

// StartShared starts a cluster for a whole test binary, typically from TestMain, and returns
// stop, which must run after m.Run. Against orphan JVMs: every JVM dies with the test binary
// (DieWithParent), whatever kills it (panic, timeout, SIGKILL). A cross-process lock on the
// base address makes a second test binary wanting the same addresses wait instead of clash.
// With an empty opts.Dir a temporary directory is used and removed by stop.
//
// A test cluster's JIT stops at C1 (Options.C1Only) unless the binary runs benchmarks: a
// test's nodes live minutes, too short for C2's compilations (40% of the nodes' CPU in a
// 4-minute run on 2 cores) to pay off, and on a shared 2-core machine that CPU is what the
// other tests' clusters wait for. Benchmarks keep the full JIT, as production runs.
func StartShared(ctx context.Context, opts Options) (c *Cluster, stop func(), err error) {
	opts.DieWithParent = true
	if !benchmarking() {
		opts.C1Only = true
	}
	base := opts.BaseAddr
	if base == "" {
		base = UserAddr
	}
	return serverproc.StartShared(ctx, "cassandra", opts.Dir, "shardmart-cassandra-"+base+".lock", func(dir string) (*Cluster, error) {
		opts.Dir = dir
		return New(opts)
	})
}

// benchmarking tells whether this test binary was asked to run benchmarks (go test -bench).
func benchmarking() bool {
	f := flag.Lookup("test.bench")
	return f != nil && f.Value.String() != ""
}

// Shared is a test binary's shared cluster, or why it did not start: the tests that need it
// fail with that reason (nothing is skipped).
type Shared struct {
	Cluster *Cluster
	Err     error
	stop    func()
	once    sync.Once
}

// StartForMain starts a shared cluster as StartShared does, for a TestMain that runs its tests
// either way; a start that fails is kept in Err, naming the cluster, or what to install when
// Java or Maven is missing. Stop must run after m.Run.
func StartForMain(ctx context.Context, opts Options) *Shared {
	c, stop, err := StartShared(ctx, opts)
	switch {
	case errors.Is(err, ErrPrerequisite):
		err = fmt.Errorf("Cassandra tests need Java 17 and Maven: %w", err)
	case err != nil:
		nodes, base := max(opts.Nodes, 1), cmp.Or(opts.BaseAddr, UserAddr)
		if len(opts.DCNodes) > 0 {
			nodes = 0
			for _, n := range opts.DCNodes {
				nodes += n
			}
		}
		err = fmt.Errorf("start a %d-node Cassandra on %s with the launcher: %w", nodes, base, err)
	}
	return &Shared{Cluster: c, Err: err, stop: stop}
}

// Need returns the cluster, or fails t with why it did not start.
func (s *Shared) Need(t serverproc.TB) *Cluster {
	t.Helper()
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	return s.Cluster
}

// Stop stops the cluster (once; nothing if it did not start).
func (s *Shared) Stop() {
	if s.stop != nil {
		s.once.Do(s.stop)
	}
}

// ForTest starts a cluster for one test and stops it in t.Cleanup, even when the test fails
// or panics. Missing Java or Maven fails the test (never a skip) with the install command.
func ForTest(t serverproc.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	start := func(ctx context.Context) (*Cluster, func(), error) { return StartShared(ctx, opts) }
	return serverproc.ForTest(t, 10*time.Minute, start, ErrPrerequisite, "Cassandra tests need Java 17 and Maven",
		func(c *Cluster) { c.LogTails(t) })
}

// LogTails logs the last lines of every node's log, for a failed test.
func (c *Cluster) LogTails(t serverproc.TB) {
	t.Helper()
	for _, n := range c.nodes {
		t.Logf("node %d (%s):\n%s", n.Index+1, n.Addr, strings.TrimSpace(tailErrors(n)))
	}
}
