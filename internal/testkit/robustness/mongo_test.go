package robustness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/serverproc"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/testkit/faultnet"
)

// electionTimeout is the set's electionTimeoutMillis: 2 s instead of MongoDB's 10 s, so that
// a fault in an 8 s run sees its failover and the package stays within its budget.
const electionTimeout = 2 * time.Second

// nemesisCheck bounds the check that a fault took (a few election timeouts, with room for a
// loaded machine): a fault that does not take fails within it, not at the end of the run.
const nemesisCheck = 10 * electionTimeout

// recovery is how long traffic goes on after the heal, as in etcd's robustness tests: the
// clients must get acknowledged writes again before the final reads.
const recovery = 4 * time.Second

// failoverWindow sizes the stock for a run whose fault waits for a failover.
const failoverWindow = 15 * time.Second

// minOrders is how many orders the shop must have acknowledged, with their call inside the
// fault, before it is healed, and after the set is whole again before traffic stops: a fault
// on the primary is held through the failover however long the failover takes, instead of for
// a fixed window that a slow failover on a loaded machine leaves without orders (15 s pauses
// held 3-5 orders). The checks still want at least one in each phase.
const minOrders = 3

// serveProjectorInterval is how often `shardmart serve` drains the outbox (internal/cli).
const serveProjectorInterval = time.Second

// maxHold bounds each hold for orders: past it the fault is healed (or traffic stopped) and
// the checks judge what was taken.
const maxHold = 45 * time.Second

// peersCutWindow is how long a cut between members lasts at least: its check waits for the
// members' heartbeats to time out, and the fault should outlast that by a few election timeouts.
const peersCutWindow = 10 * time.Second

// secondaryMargin is how much longer than the staleness budget a secondary is held: past the
// budget, and past the lag a router needs to notice.
const secondaryMargin = 3 * time.Second

// parallelTargets is how many top-level tests call t.Parallel: the four cluster targets
// and the two SQLite ones.
const parallelTargets = 6

func TestMain(m *testing.M) {
	// go test runs at most -test.parallel (GOMAXPROCS: 2 on the CI machine) parallel tests at
	// once, so the third cluster target (TestMongoDB, TestMongoDBPartitions, TestCassandra,
	// TestShardedCluster) would
	// start only when one of the others ended. They spend their time waiting on servers, not
	// computing: every target runs at once unless -test.parallel is given.
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit && runtime.GOMAXPROCS(0) < parallelTargets {
		_ = flag.Set("test.parallel", strconv.Itoa(parallelTargets))
	}
	os.Exit(m.Run())
}

// replicaSet starts a 3-member set on port (and the next two) for test t, stopped in its
// cleanup (each run logs the members' log tails when it fails).
func replicaSet(t *testing.T, port int) *launcher.Set {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	s, stop, err := launcher.StartShared(ctx, launcher.Options{
		Members: 3, BasePort: port, ElectionTimeout: electionTimeout,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		// The production settings that shorten a failover (docs/mongodb.md): no catch-up
		// round, and a secondary that gives up a frozen or cut-off sync source at once.
		NoCatchUp: true, ExtraArgs: launcher.FastFailoverParameters,
	})
	if err != nil {
		if errors.Is(err, launcher.ErrPrerequisite) {
			t.Fatalf("MongoDB tests need python3 with pip: %v", err)
		}
		t.Fatalf("a 3-member replica set on port %d: %v", port, err)
	}
	t.Cleanup(stop)
	t.Logf("3-member set up in %s (%s)", time.Since(start).Round(100*time.Millisecond), s.URI())
	return s
}

// restore starts every member that is down and waits until the set is healthy with member 0
// (priority 2) primary again, so that every run starts from the same set.
func restore(ctx context.Context, s *launcher.Set) error {
	for i := range s.Members() {
		if err := s.StartMember(ctx, i); err != nil {
			return err
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	return eventually.Until(pctx, func() error {
		if err := s.WaitHealthy(pctx); err != nil {
			return err
		}
		if p := s.Primary(pctx); p != 0 {
			return fmt.Errorf("member 0 has not taken the primary back (primary: %d)", p)
		}
		return nil
	})
}

// nemesis injects one fault into member victim for about window, verifies that it took, and
// returns heal, which undoes it. heal may be called more than once; the run also calls it in t.Cleanup, so a
// failing test leaves no paused process or iptables rule behind.
type nemesis struct {
	name string
	// disrupts: clients of the primary must see the fault while it lasts (an unknown outcome,
	// an error or a stalled answer); a step-down may hand over cleanly between two operations.
	disrupts bool
	inject   func(t *testing.T, ctx context.Context, s *launcher.Set, victim int, window time.Duration) (heal func(context.Context) error, err error)
	// minWindow is the shortest fault, when longer than half the run; every fault is also held
	// until the shop took orders inside it (holdFor).
	minWindow time.Duration
	// secondary: the victim is a secondary, held for longer than budget (RPL-1's, 5 s if
	// unset), so that reads routed to it would come back stale unless routed away.
	secondary bool
	budget    time.Duration
}

// processNemeses act on a member's process or its role; networkNemeses cut links. Each group
// has a set of its own, so the two run side by side: a run spends its time waiting for a
// failover or a window, and the groups in turn took over 3 minutes.
var processNemeses = []nemesis{
	{name: "kill", disrupts: true, inject: killNemesis},
	{name: "pause", disrupts: true, inject: pauseNemesis},
	{name: "stepdown", inject: stepdownNemesis},
	{name: "pause-secondary", inject: pauseNemesis, secondary: true},
	{name: "lag-secondary", inject: lagNemesis, secondary: true, budget: historyBudget},
}

var networkNemeses = []nemesis{
	{name: "partition", disrupts: true, inject: partitionNemesis},
	// The shop's driver still reaches the deposed primary and the others: it finds the new
	// primary within seconds, and took 18-79 orders in 15 s windows.
	{name: "deposed", disrupts: true, inject: deposedNemesis, minWindow: peersCutWindow},
	{name: "bridge", inject: bridgeNemesis, minWindow: peersCutWindow},
}

// killNemesis SIGKILLs the member (a crash) and restarts it on heal.
func killNemesis(t *testing.T, ctx context.Context, s *launcher.Set, victim int, _ time.Duration) (func(context.Context) error, error) {
	if err := s.Kill(ctx, victim); err != nil {
		return nil, err
	}
	if s.Running(victim) {
		return nil, fmt.Errorf("member %d still runs after SIGKILL", victim)
	}
	return func(ctx context.Context) error { return s.StartMember(ctx, victim) }, nil
}

// pauseNemesis freezes the member (SIGSTOP) and resumes it (SIGCONT) on heal.
func pauseNemesis(t *testing.T, ctx context.Context, s *launcher.Set, victim int, _ time.Duration) (func(context.Context) error, error) {
	pid, ok := s.PID(victim)
	if !ok {
		return nil, fmt.Errorf("member %d is not running", victim)
	}
	heal := func(context.Context) error {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
		return nil
	}
	if err := s.Pause(victim); err != nil {
		return heal, err
	}
	// Counted on only once the kernel says every thread is stopped; its own deadline, so that a
	// pause that does not take fails within seconds, not at the end of the run.
	sctx, cancel := context.WithTimeout(ctx, nemesisCheck)
	defer cancel()
	return heal, eventually.Until(sctx, func() error { return serverproc.Stopped(pid) })
}

// stepdownNemesis asks the primary to step down (replSetStepDown), ineligible for longer than
// the window so that it does not take the primary back (priority 2) half-way, and lets it stand
// again on heal (replSetFreeze 0 ends a step-down period too).
func stepdownNemesis(t *testing.T, ctx context.Context, s *launcher.Set, victim int, window time.Duration) (func(context.Context) error, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(s.MemberURI(victim)))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	admin := c.Database("admin")
	heal := func(ctx context.Context) error {
		err := admin.RunCommand(ctx, bson.D{{Key: "replSetFreeze", Value: 0}}).Err()
		var ce mongo.CommandError
		if errors.As(err, &ce) && ce.Name == "NotSecondary" { // primary again: nothing to undo
			return nil
		}
		return err
	}
	// The command closes the connections of the stepped-down primary: a network error here is
	// the step-down happening; whether it did is asked below.
	secs := int(window.Seconds()) + 10
	sctx, cancel := context.WithTimeout(ctx, nemesisCheck)
	defer cancel()
	_ = admin.RunCommand(sctx, bson.D{{Key: "replSetStepDown", Value: secs}, {Key: "secondaryCatchUpPeriodSecs", Value: 5}}).Err()
	err = eventually.Until(sctx, func() error {
		var hello struct {
			Primary bool `bson:"isWritablePrimary"`
		}
		if err := admin.RunCommand(sctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
			return err
		}
		if hello.Primary {
			return fmt.Errorf("member %d is still primary", victim)
		}
		return nil
	})
	return heal, err
}

// partitionNemesis cuts the member off from everyone (its peers and the shop's driver) with
// iptables rules in a chain of the run's own; heal removes the rules, and the chain goes in
// t.Cleanup.
func partitionNemesis(t *testing.T, ctx context.Context, s *launcher.Set, victim int, _ time.Duration) (func(context.Context) error, error) {
	host, port, pid, err := memberAddr(s, victim)
	if err != nil {
		return nil, err
	}
	chain := faultnet.New(t)
	heal := func(ctx context.Context) error { return chain.Heal(ctx) }
	if err := chain.CutProcess(ctx, t, pid, port); err != nil {
		return heal, err
	}
	// Counted on only once a probe gets no answer (a DROP; a refusal or a failed probe proves
	// nothing) and the rest of the set sees it from its side: another member is primary and
	// reports the victim unreachable.
	if err := faultnet.Dial(ctx, 0, host, port, time.Second); !errors.Is(err, faultnet.ErrNoAnswer) {
		return heal, fmt.Errorf("member %d (%s) behind the partition: want a probe to get no answer, got %v", victim, s.Members()[victim].Host, err)
	}
	return heal, cutOffFromPeers(ctx, s, victim)
}

// cutOffFromPeers waits, for a few election timeouts, until a member other than victim is
// primary and its replSetGetStatus reports victim unreachable (health 0).
func cutOffFromPeers(ctx context.Context, s *launcher.Set, victim int) error {
	wctx, cancel := context.WithTimeout(ctx, nemesisCheck)
	defer cancel()
	return eventually.Until(wctx, func() error {
		var last error
		for i := range s.Members() {
			if i == victim {
				continue
			}
			if last = memberSeesCut(wctx, s, i, victim); last == nil {
				return nil
			}
		}
		return last
	})
}

// memberSeesCut is nil when member i is primary and reports victim's health as 0.
func memberSeesCut(ctx context.Context, s *launcher.Set, i, victim int) error {
	st, err := memberStatus(ctx, s, i)
	if err != nil {
		return err
	}
	if st.MyState != 1 {
		return fmt.Errorf("member %d is not primary (state %d)", i, st.MyState)
	}
	m, ok := st.member(s, victim)
	switch {
	case !ok:
		return fmt.Errorf("primary %d does not list member %d", i, victim)
	case m.Health != 0:
		return fmt.Errorf("primary %d still reports member %d healthy", i, victim)
	}
	return nil
}

// TestMongoDB runs every workload against a 3-member set under each process nemesis.
func TestMongoDB(t *testing.T) {
	t.Parallel() // beside the other targets; the nemeses share one set, so they run in turn
	runMongoNemeses(t, replicaSet(t, launcher.RobustnessTestPort), processNemeses)
}

// TestMongoDBPartitions runs every workload against a set of its own under each network
// nemesis.
func TestMongoDBPartitions(t *testing.T) {
	t.Parallel()
	runMongoNemeses(t, replicaSet(t, launcher.RobustnessPartitionTestPort), networkNemeses)
}

func runMongoNemeses(t *testing.T, s *launcher.Set, ns []nemesis) {
	cfg := runSettings(t)
	for _, n := range ns {
		for r := range cfg.repeat {
			t.Run(fmt.Sprintf("%s/%d", n.name, r), func(t *testing.T) {
				runMongo(t, s, n, cfg, cfg.seed+uint64(r))
			})
		}
	}
}

// runMongo: traffic for a quarter of cfg.duration, the nemesis on the primary for half of it
// (at least its minWindow) or on a secondary past its staleness budget, and until the shop took
// orders inside it; traffic after the heal until the set is whole and the shop took orders
// again (at least the recovery period), then the checks once the set is healthy.
func runMongo(t *testing.T, s *launcher.Set, n nemesis, cfg settings, seed uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+6*time.Minute)
	defer cancel()
	if err := restore(ctx, s); err != nil {
		t.Fatalf("restore a healthy set: %v", err)
	}
	// Registered first, so it runs last: after the nemesis's own cleanup.
	t.Cleanup(func() {
		rctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := restore(rctx, s); err != nil {
			t.Errorf("restore a healthy set after the run: %v", err)
		}
		if t.Failed() {
			for i := range s.Members() {
				t.Logf("member %d:\n%s", i, s.LogTail(i))
			}
		}
	})
	cfgP := placement.Config{}
	for _, f := range placement.Families {
		cfgP[f] = placement.Mongo
	}
	run := runName("m")
	sh, err := shop.Open(ctx, shop.Config{Placement: cfgP, Backends: placement.Options{MongoURI: s.URI(), MongoDatabase: "robustness_" + n.name + "_" + run},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	window := max(cfg.duration/2, n.minWindow)
	budget := stalenessBudget
	if n.budget > 0 {
		budget = n.budget
	}
	if n.secondary {
		window = max(cfg.duration/2, budget+secondaryMargin)
	}
	after := recovery
	// The fault and the recovery are held for orders (holdFor), so traffic may run longer
	// than planned: the stock is sized for a full failover window.
	w := newWorkload(sh, run, seed, cfg.duration/4+max(window, failoverWindow)+after)
	if err := w.setup(ctx); err != nil {
		t.Fatal(err)
	}

	// Traffic stops the recovery period after the heal (or after a fault that did not take).
	tctx, stop := context.WithTimeout(ctx, cfg.duration+5*time.Minute)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.traffic(tctx)
	}()
	// The projector runs in the background as serve runs it: an order's or a status move's
	// follow-ups (its history entry) that the caller's own Sync could not apply during the
	// fault are applied within its interval once the store answers again.
	projected := make(chan struct{})
	go func() {
		defer close(projected)
		sh.Projector.Run(tctx, serveProjectorInterval)
	}()
	defer func() { stop(); <-projected }()
	var f *fault
	var healing time.Time // when the heal began: reads answered before it met the fault
	func() {
		defer func() {
			if f == nil { // no fault to recover from
				_ = wait(tctx, after)
			} else {
				w.recover(t, tctx, s, f.to, after)
			}
			stop()
		}()
		if err := wait(tctx, cfg.duration/4); err != nil {
			return
		}
		victim := s.Primary(ctx)
		if victim < 0 {
			t.Error("no primary to inject the fault into")
			return
		}
		if n.secondary {
			victim = (victim + 1) % len(s.Members())
		}
		from := time.Now()
		h, err := n.inject(t, ctx, s, victim, window)
		heal := healOnce(t, n.name, h)
		if err != nil {
			t.Errorf("%s of member %d did not take: %v", n.name, victim, err)
			// Heal now: the recovery and the checks need a whole set, not one left
			// half-faulted until t.Cleanup.
			if err := heal(ctx); err != nil {
				t.Errorf("heal %s: %v", n.name, err)
			}
			return
		}
		w.holdFor(tctx, from, from.Add(window))
		healing = time.Now()
		if err := heal(ctx); err != nil {
			t.Errorf("heal %s: %v", n.name, err)
		}
		f = &fault{name: n.name, from: from, to: time.Now(), annotation: fmt.Sprintf("%s of member %d (%s)", n.name, victim, s.Members()[victim].Host)}
		for _, r := range []*recorder{w.stock, w.status, w.price, w.historyPage} {
			r.addFault(*f)
		}
		t.Logf("%s of member %d from +%s to +%s", n.name, victim, f.from.Sub(w.stock.start).Round(time.Millisecond), f.to.Sub(w.stock.start).Round(time.Millisecond))
	}()
	<-done
	faults := 0
	if f != nil {
		faults = 1
		checkEffect(t, n, w.phases(*f))
		if n.secondary {
			// The staleness check in verify covers these reads; it proves something only if
			// reads were served while the secondary lagged past the budget.
			if k := w.pageReadsIn(f.from, healing); k == 0 {
				t.Errorf("no page read begun during the %s (%s) was answered before its heal: the staleness budget was not put to the test", n.name, f.to.Sub(f.from).Round(time.Millisecond))
			} else {
				t.Logf("%d page reads begun during the %s and answered before its heal, checked against the %s budget", k, n.name, stalenessBudget)
			}
			if budget == historyBudget {
				// Reads made once the victim was more than the history's budget behind.
				if k := w.historyReadsLagging(f.from, healing); k == 0 {
					t.Errorf("no history read begun %s or more into the %s was answered before its heal: the %s budget was not put to the test", historyBudget, n.name, historyBudget)
				} else {
					t.Logf("%d history reads begun %s or more into the %s and answered before its heal, checked against the %s budget", k, historyBudget, n.name, historyBudget)
				}
			}
		}
	}
	if err := restore(ctx, s); err != nil {
		t.Fatalf("the set did not heal: %v", err)
	}
	// The shop's own driver must take writes again before its reads count as the final word.
	if err := retry(ctx, func(ctx context.Context) error {
		_, err := sh.Stores.Products.GetProduct(ctx, w.bank[0])
		return err
	}); err != nil {
		t.Fatalf("the shop did not reach the healed set: %v", err)
	}
	report(t, n.name, w.verify(t, ctx), faults)
}

// checkEffect fails a run in which the fault left no trace its clients could see, or in
// which the shop did not take writes in each phase: before the fault, while it lasted (after
// the failover) and after the heal. Such a run proves nothing about the fault.
func checkEffect(t *testing.T, n nemesis, p [3]phase) {
	t.Helper()
	t.Logf("before / during / after the %s: acknowledged writes %d / %d / %d (orders %d / %d / %d); unknown or failed operations %d / %d / %d; answers stalled ≥ %s %d / %d / %d",
		n.name, p[0].acked, p[1].acked, p[2].acked, p[0].orders, p[1].orders, p[2].orders, p[0].failed, p[1].failed, p[2].failed, stall, p[0].stalled, p[1].stalled, p[2].stalled)
	for _, err := range effectErrors(n, p) {
		t.Error(err)
	}
}

// effectErrors is checkEffect's verdict, one error per failed expectation.
func effectErrors(n nemesis, p [3]phase) []error {
	var errs []error
	for i, name := range []string{"before", "during", "after"} {
		if p[i].acked == 0 {
			errs = append(errs, fmt.Errorf("no acknowledged write called %s the %s", name, n.name))
		}
	}
	if p[1].orders == 0 || p[2].orders == 0 {
		errs = append(errs, fmt.Errorf("want acknowledged orders called during the %s and after its heal, got %d and %d", n.name, p[1].orders, p[2].orders))
	}
	if n.disrupts && p[1].failed+p[1].stalled == 0 {
		errs = append(errs, fmt.Errorf("the %s had no observable effect: no operation failed, was left unknown or stalled for %s while it lasted", n.name, stall))
	}
	return errs
}

// holdFor waits until the shop has acknowledged minOrders orders called from since, and at
// least until notBefore; at most maxHold from since.
func (w *workload) holdFor(ctx context.Context, since, notBefore time.Time) {
	for time.Now().Before(since.Add(maxHold)) && ctx.Err() == nil {
		if !time.Now().Before(notBefore) && w.ordersAcked(since) >= minOrders {
			return
		}
		_ = wait(ctx, 100*time.Millisecond)
	}
}

// recover keeps traffic going after the heal at healed until the set is whole again (every
// member up, member 0 primary: what restore waits for) and the shop took minOrders orders
// from then on, and for at least after; each wait at most maxHold.
func (w *workload) recover(t *testing.T, ctx context.Context, s *launcher.Set, healed time.Time, after time.Duration) {
	whole := healed
	for time.Since(healed) < maxHold && ctx.Err() == nil {
		if setWhole(ctx, s) {
			whole = time.Now()
			break
		}
		_ = wait(ctx, 100*time.Millisecond)
	}
	w.holdFor(ctx, whole, healed.Add(after))
	t.Logf("after the heal: the set whole again at +%s, traffic stopped at +%s (%d orders since)",
		whole.Sub(healed).Round(time.Millisecond), time.Since(healed).Round(time.Millisecond), w.ordersAcked(whole))
}

// setWhole: every member answers as primary or secondary, member 0 (priority 2) primary.
func setWhole(ctx context.Context, s *launcher.Set) bool {
	for _, st := range s.Status(ctx) {
		if (st.Index == 0) != (st.State == "PRIMARY") || (st.State != "PRIMARY" && st.State != "SECONDARY") {
			return false
		}
	}
	return true
}

// ordersAcked counts the orders acknowledged with their call at or after since.
func (w *workload) ordersAcked(since time.Time) int {
	n := 0
	for _, ops := range w.stock.byKey() {
		for _, o := range ops {
			if o.client >= 0 && isWrite(o.in) && !o.unknown && !o.out.(result).refused && !o.call.Before(since) {
				n++
			}
		}
	}
	return n
}
