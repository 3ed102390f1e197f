package robustness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/serverproc"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/testkit/faultnet"
)

// cassKeyspace holds every Cassandra run's data; the runs' ids keep them apart.
const cassKeyspace = "robustness"

// cassPause is how long a node stays frozen or cut off: past the driver's per-attempt timeout
// and the peers' failure detector (phi, a few seconds), within the 8-15 s a long GC pause or a
// stuck disk lasts.
const cassPause = 10 * time.Second

// cassBootTimeout bounds a node's start: a SIGKILLed node replays its commit log on restart,
// minutes on a loaded machine.
const cassBootTimeout = 6 * time.Minute

// killTraffic is how long the workload's traffic runs through a killed node's restart (its
// stock and keys are sized for it): the restart takes 30-60 s at a load of 1-2; a longer one
// is waited for with the clients hushed instead of a workload sized for cassBootTimeout,
// whose setup alone took minutes.
const killTraffic = time.Minute

// afterConviction is how long a fault lasts at least once inject confirmed it: for a partition,
// past the failure detector's conviction, so that the coordinators route around the victim.
const afterConviction = 5 * time.Second

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// cassNemesis injects one fault into the cluster for about window and returns heal, which
// undoes it (it may be called more than once; the run calls it again in t.Cleanup). victims
// names the nodes it acts on, for the log and the visualisation.
type cassNemesis struct {
	name    string
	victims string
	inject  func(t *testing.T, ctx context.Context, c *launcher.Cluster) (heal func(context.Context) error, err error)
}

// Node indexes (0-based). Node 0 is the seed; the faults fall on the others so that a
// restarted node always finds its seed.
var cassNemeses = []cassNemesis{
	{"kill", "node 3", func(t *testing.T, ctx context.Context, c *launcher.Cluster) (func(context.Context) error, error) {
		return killNode(ctx, c, 2)
	}},
	{"pause", "node 2", func(t *testing.T, ctx context.Context, c *launcher.Cluster) (func(context.Context) error, error) {
		return pauseNode(ctx, c, 1)
	}},
	// One node of three cut off from both peers: the minority side of a majority/minority split.
	// The shop still reaches every node over CQL, so the isolated node keeps coordinating.
	{"isolate", "node 2", func(t *testing.T, ctx context.Context, c *launcher.Cluster) (func(context.Context) error, error) {
		return isolateNode(t, ctx, c, 1)
	}},
	// Node 1 and node 2 cannot talk; node 3 talks to both (a bridge).
	{"bridge", "nodes 1 and 2 (node 3 sees both)", func(t *testing.T, ctx context.Context, c *launcher.Cluster) (func(context.Context) error, error) {
		return bridge(t, ctx, c, 0, 1, 2)
	}},
}

// killNode SIGKILLs node i (a crash) and restarts it on heal, until it answers CQL (the run
// waits for the whole ring before its checks).
func killNode(ctx context.Context, c *launcher.Cluster, i int) (func(context.Context) error, error) {
	heal := func(ctx context.Context) error { return c.StartNode(ctx, i) }
	if err := c.KillNode(ctx, i); err != nil {
		return heal, err
	}
	if c.Running(i) {
		return heal, fmt.Errorf("node %d still runs after SIGKILL", i+1)
	}
	return heal, nil
}

// nodePID is node i's JVM as the launcher recorded it.
func nodePID(c *launcher.Cluster, i int) (int, error) {
	b, err := os.ReadFile(filepath.Join(c.Nodes()[i].Dir, "cassandra.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// pauseNode freezes node i (SIGSTOP to its process group) and resumes it on heal. It counts
// only once the kernel reports every thread of the JVM stopped.
func pauseNode(ctx context.Context, c *launcher.Cluster, i int) (func(context.Context) error, error) {
	heal := func(context.Context) error {
		if err := c.ResumeNode(i); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		return nil
	}
	pid, err := nodePID(c, i)
	if err != nil {
		return heal, err
	}
	if err := c.PauseNode(i); err != nil {
		return heal, err
	}
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return heal, eventually.Until(sctx, func() error { return serverproc.Stopped(pid) })
}

// probe is one TCP connect that must (or must not) get through: from a process of group gid
// (0: the test's own) to addr:port.
type probe struct {
	gid       int
	addr      string
	port      int
	reachable bool
}

// verifyProbes counts on a cut only once every probe agrees: a path cut gets no answer within
// a second (a DROP; a refusal proves nothing), a path left open connects.
func verifyProbes(ctx context.Context, probes []probe) error {
	for _, p := range probes {
		err := faultnet.Dial(ctx, p.gid, p.addr, p.port, time.Second)
		if p.reachable && err != nil || !p.reachable && !errors.Is(err, faultnet.ErrNoAnswer) {
			return fmt.Errorf("probe %s:%d as gid %d: want reachable %v, got %v", p.addr, p.port, p.gid, p.reachable, err)
		}
	}
	return nil
}

// isolateNode cuts node i off from its peers on the storage port (faultnet.CutOff: its JVM's
// group and its address), verified from both ends; the CQL port stays open.
func isolateNode(t *testing.T, ctx context.Context, c *launcher.Cluster, i int) (func(context.Context) error, error) {
	chain := faultnet.New(t)
	nodes := c.Nodes()
	node, peer := nodes[i], nodes[(i+1)%len(nodes)]
	if err := chain.CutOff(ctx, node.Addr, node.GID, launcher.StoragePort); err != nil {
		return chain.Heal, err
	}
	if err := verifyProbes(ctx, []probe{
		{0, node.Addr, launcher.StoragePort, false},
		{node.GID, peer.Addr, launcher.StoragePort, false},
		{0, peer.Addr, launcher.StoragePort, true},
		{0, node.Addr, launcher.CQLPort, true},
	}); err != nil {
		return chain.Heal, err
	}
	_, err := awaitStatus(ctx, c, []seen{{(i + 1) % len(nodes), i, "DN"}}, convictionTimeout)
	return chain.Heal, err
}

// seen is one node's view of another in `nodetool status` ("UN", "DN", ...); state "" takes
// any, for the log.
type seen struct {
	by, of int
	state  string
}

// convictionTimeout bounds the wait for the peers' failure detector (phi) to convict a cut-off
// node: a few seconds on an idle machine, plus one nodetool JVM start per poll at our load.
const convictionTimeout = time.Minute

// awaitStatus polls `nodetool status` until every view holds: the proof that a cut took effect
// inside Cassandra (gossip convicted the node), not only at the sockets. Each poll runs one
// nodetool per node that views name, all at once: a JVM start is seconds here. It returns the
// states the views last saw.
func awaitStatus(ctx context.Context, c *launcher.Cluster, views []seen, within time.Duration) ([]string, error) {
	sctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	nodes := c.Nodes()
	var by []int
	for _, v := range views {
		if !slices.Contains(by, v.by) {
			by = append(by, v.by)
		}
	}
	got := make([]string, len(views))
	var mismatch error // the last view seen wrong: what the deadline's error would hide
	err := eventually.Until(sctx, func() error {
		outs, errs := make([]string, len(nodes)), make([]error, len(nodes))
		var wg sync.WaitGroup
		for _, i := range by {
			wg.Go(func() { outs[i], errs[i] = c.Nodetool(sctx, i, "status") })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		mismatch = nil
		for j, v := range views {
			got[j] = statusOf(outs[v.by], nodes[v.of].Addr)
			if v.state != "" && got[j] != v.state && mismatch == nil {
				mismatch = fmt.Errorf("node %d sees node %d as %q, want %q", v.by+1, v.of+1, got[j], v.state)
			}
		}
		return mismatch
	})
	if err != nil {
		return got, fmt.Errorf("nodetool status within %s: %w (last seen: %v)", within, err, mismatch)
	}
	return got, nil
}

// statusOf is addr's state column ("UN", "DN", ...) in `nodetool status` output, "" if absent.
func statusOf(status, addr string) string {
	for _, line := range strings.Split(status, "\n") {
		// A node's line starts with U or D (up/down) and N, L, J or M (its state).
		if f := strings.Fields(line); len(f) >= 2 && f[1] == addr && len(f[0]) == 2 && strings.ContainsRune("UD", rune(f[0][0])) {
			return f[0]
		}
	}
	return ""
}

// bridge cuts the storage path between nodes a and b in both directions (each one's JVM, by
// its group, towards the other's address), leaving both connected to node via.
func bridge(t *testing.T, ctx context.Context, c *launcher.Cluster, a, b, via int) (func(context.Context) error, error) {
	chain := faultnet.New(t)
	nodes := c.Nodes()
	na, nb, nv := nodes[a], nodes[b], nodes[via]
	if na.GID <= 0 || nb.GID <= 0 {
		return chain.Heal, fmt.Errorf("a bridge needs each node under a group of its own (gids %d, %d): run as root", na.GID, nb.GID)
	}
	port := strconv.Itoa(launcher.StoragePort)
	for _, r := range [][2]launcher.Node{{na, nb}, {nb, na}} {
		from, to := r[0], r[1]
		if err := chain.Append(ctx, "-d", to.Addr, "-p", "tcp", "--dport", port, "-m", "owner", "--gid-owner", strconv.Itoa(from.GID), "-j", "DROP"); err != nil {
			return chain.Heal, err
		}
	}
	if err := verifyProbes(ctx, []probe{
		{na.GID, nb.Addr, launcher.StoragePort, false},
		{nb.GID, na.Addr, launcher.StoragePort, false},
		{na.GID, nv.Addr, launcher.StoragePort, true},
		{nb.GID, nv.Addr, launcher.StoragePort, true},
		{nv.GID, na.Addr, launcher.StoragePort, true},
		{nv.GID, nb.Addr, launcher.StoragePort, true},
	}); err != nil {
		return chain.Heal, err
	}
	// Nodes a and b do not convict each other: gossip carries each one's heartbeat to the other
	// through via, so their failure detectors keep them up (node 1 still showed node 2 UN with
	// the cut in place). The probes prove the cut; via must still see both up.
	got, err := awaitStatus(ctx, c, []seen{{via, a, "UN"}, {via, b, "UN"}, {a, b, ""}}, convictionTimeout)
	if err == nil {
		t.Logf("bridge: node %d sees node %d as %q", a+1, b+1, got[2])
	}
	return chain.Heal, err
}

// cassPlacement is the hybrid placement of the issue: carts, sessions and history on the
// cluster; orders, products, events and the catalog embedded in the test process.
func cassPlacement() placement.Config {
	cfg := placement.Embedded()
	for _, f := range []placement.Family{placement.Carts, placement.Sessions, placement.History} {
		cfg[f] = placement.Cassandra
	}
	return cfg
}

// TestCassandra runs the workloads on the hybrid placement against a real 3-node cluster
// (RF 3) under each nemesis.
func TestCassandra(t *testing.T) {
	t.Parallel()
	cfg := runSettings(t)
	start := time.Now()
	c := launcher.ForTest(t, launcher.Options{Nodes: 3, BaseAddr: launcher.RobustnessTestAddr, Name: "shardmart-robustness",
		HeapMB: 384, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		BootTimeout: cassBootTimeout})
	up := time.Since(start)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := cassandrastore.ApplySchema(ctx, c.Hosts(), cassandrastore.SchemaOptions{Keyspace: cassKeyspace, RF: 3}); err != nil {
		t.Fatalf("schema: %v", err)
	}
	t.Logf("3-node cluster up with the schema (RF 3) in %s (the ring converged in %s, per-node boot %v); load %s",
		time.Since(start).Round(100*time.Millisecond), up.Round(100*time.Millisecond), c.BootTimes(), loadavg())
	cl := gocql.NewCluster(c.Hosts()...)
	cl.Timeout = 10 * time.Second
	cs, err := cl.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cs.Close)
	// The session checker's second opinion: every replica's copy, merged.
	allReplicas := func(ctx context.Context, id string) (string, bool, error) {
		var user string
		err := cs.Query(`SELECT user_id FROM `+cassKeyspace+`.sessions WHERE session_id = ?`, id).Consistency(gocql.All).ScanContext(ctx, &user)
		if errors.Is(err, gocql.ErrNotFound) {
			return "", false, nil
		}
		return user, err == nil, err
	}
	// Up waited for the ring to converge; each run leaves it converged for the next one (it
	// restores it before its checks, and again in its cleanup when it failed).
	whole := true
	for _, n := range cassNemeses {
		for r := range cfg.repeat {
			t.Run(fmt.Sprintf("%s/%d", n.name, r), func(t *testing.T) {
				runCassandra(t, c, allReplicas, n, cfg, cfg.seed+uint64(r), &whole)
			})
		}
	}
}

// restoreCluster starts every node that is down and waits until the ring is whole: every
// node sees every node UN (what the launcher's WaitConverged waits for, with the nodetool
// calls at once instead of one after the other).
func restoreCluster(ctx context.Context, c *launcher.Cluster) error {
	var whole []seen
	for i := range c.Nodes() {
		if err := c.StartNode(ctx, i); err != nil {
			return err
		}
		for j := range c.Nodes() {
			whole = append(whole, seen{i, j, "UN"})
		}
	}
	_, err := awaitStatus(ctx, c, whole, cassBootTimeout)
	return err
}

// runCassandra: traffic for a quarter of cfg.duration, the nemesis for half of it, at least
// cassPause (a kill lasts until its restart is done), traffic for the recovery period after
// the heal, then the checks.
//
// whole says that the ring is converged with every node up: set by the run that restored it,
// cleared while a run may have left a node down or cut off. Each restore runs `nodetool
// status`, a JVM start, on every node, so a passing run skips the ones whole makes redundant.
func runCassandra(t *testing.T, c *launcher.Cluster, allReplicas func(context.Context, string) (string, bool, error), n cassNemesis, cfg settings, seed uint64, whole *bool) {
	// A SIGKILLed node's restart took over 5 minutes at a load average of 80.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+15*time.Minute)
	defer cancel()
	began := time.Now()
	step := began
	took := func() time.Duration { // since the last call: the run's phases, for the log
		now := time.Now()
		d := now.Sub(step)
		step = now
		return d.Round(100 * time.Millisecond)
	}
	if !*whole {
		if err := restoreCluster(ctx, c); err != nil {
			t.Fatalf("restore a healthy cluster: %v", err)
		}
		*whole = true
	}
	*whole = false
	// Registered first, so it runs last: after the nemesis's own cleanup.
	t.Cleanup(func() {
		if *whole && !t.Failed() {
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), cassBootTimeout)
		defer cancel()
		if err := restoreCluster(rctx, c); err != nil {
			t.Errorf("restore a healthy cluster after the run: %v", err)
		} else {
			*whole = true
		}
		if t.Failed() {
			c.LogTails(t)
		}
	})
	restored := took()
	run := runName("c")
	sh, err := shop.Open(ctx, shop.Config{Placement: cassPlacement(), Logger: slog.New(slog.DiscardHandler),
		Backends: placement.Options{SQLitePath: filepath.Join(t.TempDir(), "shop.db"), CassandraHosts: c.Hosts(), CassandraKeyspace: cassKeyspace}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	window := cfg.duration / 2
	if n.name != "kill" { // a kill lasts until its restart is done
		window = max(window, cassPause)
	}
	planned := window
	if n.name == "kill" {
		// Traffic runs on through the restart for up to killTraffic (the stock and the keys
		// are sized for it); a longer restart hushes the workload's clients until it is done,
		// so that no product sells out and no key fills up before the orders after the heal.
		planned = max(planned, killTraffic)
	}
	// The fault and the recovery are held for orders (holdFor), so traffic may run up to
	// maxHold longer than planned.
	w := newWorkload(sh, run, seed, cfg.duration/4+max(planned, failoverWindow)+recovery)
	x := newShopWorkload(sh, run, seed, w.duration)
	x.allReplicas = allReplicas
	x.gate = w.gate // hushed together: the checks' cost grows with the traffic too
	if err := w.setup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := x.setup(ctx); err != nil {
		t.Fatal(err)
	}
	set := took()

	// Traffic ends the recovery period after the heal, however long the fault took.
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); w.traffic(tctx) }()
		go func() { defer wg.Done(); x.traffic(tctx) }()
		wg.Wait()
	}()
	// The projector runs in the background as serve runs it: an order's history entry that the
	// caller's own Sync could not write during the fault is written within its interval once
	// the cluster answers again, as the history check expects.
	projected := make(chan struct{})
	go func() {
		defer close(projected)
		sh.Projector.Run(tctx, serveProjectorInterval)
	}()
	defer func() { stop(); <-projected }()
	var f *fault
	func() {
		defer func() {
			healed := time.Now()
			if f != nil {
				healed = f.to
			}
			w.holdFor(tctx, healed, healed.Add(recovery))
			stop()
		}()
		if err := wait(tctx, cfg.duration/4); err != nil {
			return
		}
		from := time.Now()
		h, err := n.inject(t, ctx, c)
		heal := healOnce(t, n.name, h)
		if err != nil {
			t.Errorf("%s of %s did not take: %v", n.name, n.victims, err)
			// Heal now: the recovery and the checks need a whole cluster, not one left
			// half-faulted until t.Cleanup.
			if err := heal(ctx); err != nil {
				t.Errorf("heal %s: %v", n.name, err)
			}
			return
		}
		injected := time.Now()
		// A killed node's fault lasts until its restart is done, so its heal (the restart, a
		// minute or more here) starts at once and the hold for orders runs beside it: the
		// node is down all the while, as when the restart waited for the hold.
		healing := injected
		healed := make(chan error, 1)
		if n.name == "kill" {
			go func() { healed <- heal(ctx) }()
		}
		// A partition counts once the failure detector convicted the victim, which may come
		// late in the window: the fault lasts afterConviction past it at least.
		w.holdFor(tctx, from, later(from.Add(window), time.Now().Add(afterConviction)))
		if n.name != "kill" {
			healing = time.Now()
			healed <- heal(ctx)
		} else if hushAt := time.Until(from.Add(planned)); hushAt > 0 {
			select {
			case err := <-healed:
				healed <- err
			case <-time.After(hushAt):
			}
		}
		if len(healed) == 0 {
			w.hush(true)
			t.Logf("%s: the restart outlasts the %s of traffic the workload is sized for: its clients wait for it", n.name, planned)
		}
		err = <-healed
		w.hush(false)
		if err != nil {
			t.Errorf("heal %s: %v", n.name, err)
		}
		f = &fault{name: n.name, from: from, to: time.Now(), annotation: n.name + " of " + n.victims}
		t.Logf("%s: injected and verified in %s, held %s, healed in %s (the heal began %s after the inject)", n.name, injected.Sub(from).Round(100*time.Millisecond),
			f.to.Sub(injected).Round(100*time.Millisecond), f.to.Sub(healing).Round(100*time.Millisecond), healing.Sub(injected).Round(100*time.Millisecond))
		for _, r := range []*recorder{w.stock, w.status, w.price, w.historyPage, x.checkout, x.sessions, x.history} {
			r.addFault(*f)
		}
		t.Logf("%s of %s from +%s to +%s", n.name, n.victims, f.from.Sub(w.stock.start).Round(time.Millisecond), f.to.Sub(w.stock.start).Round(time.Millisecond))
	}()
	<-done
	traffic := took()
	faults := 0
	if f != nil {
		faults = 1
		checkCassEffect(t, n.name, x.phases(*f, w))
	}
	if err := restoreCluster(ctx, c); err != nil {
		t.Fatalf("the cluster did not heal: %v", err)
	}
	*whole = true
	converged := took()
	report(t, n.name, w.verify(t, ctx), faults)
	x.report(t, n.name, x.verify(t, ctx, w))
	t.Logf("%s run: %s in all: restore %s, shop and setup %s, traffic %s, ring converged %s, checks %s; load %s",
		n.name, time.Since(began).Round(100*time.Millisecond), restored, set, traffic, converged, took(), loadavg())
}

// checkCassEffect: the Cassandra-backed writes (cart edits, checkouts, sessions, history
// entries, orders through a Cassandra cart) were acknowledged before the fault, during it and
// after the heal, orders among them during and after. Whether a client noticed the fault is
// logged, not required: the client policy exists to hide one sick node of three.
func checkCassEffect(t *testing.T, name string, p [3]phase) {
	t.Helper()
	checkEffect(t, nemesis{name: name}, p)
}

func TestNodetoolStatusOf(t *testing.T) {
	out := `Datacenter: datacenter1
=======================
Status=Up/Down
|/ State=Normal/Leaving/Joining/Moving
--  Address     Load        Tokens  Owns (effective)  Host ID                               Rack
UN  127.0.42.1  412.3 KiB   16      100.0%            0b7e3c1e-6f0a-4c43-9d0e-1f7d3c2b9a10  rack1
DN  127.0.42.2  398.1 KiB   16      100.0%            5c1d2e3f-7a8b-4c9d-8e0f-1a2b3c4d5e6f  rack1
UJ  127.0.42.3  ?           16      ?                 9f8e7d6c-5b4a-4392-8170-6e5d4c3b2a19  rack1
`
	for addr, want := range map[string]string{"127.0.42.1": "UN", "127.0.42.2": "DN", "127.0.42.3": "UJ", "127.0.42.4": "", "Address": ""} {
		if got := statusOf(out, addr); got != want {
			t.Errorf("statusOf(%s) = %q, want %q", addr, got, want)
		}
	}
}
