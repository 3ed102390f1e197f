package readrouting_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/readrouting"
	smongo "github.com/shardmart/shardmart/internal/store/mongostore"
)

// These tests run on the real 3-member mongod 6.0.5 set of readrouting.LiveSet.

const (
	zone     = "eu-west"
	category = "lighting"
	budget   = 5 * time.Second // OpProductPage and OpCategorySearch
)

// TestWatchLagOnPlainReplicaSetMonitorsTheSetItself: `serve --mongo-uri <replica set>` opens
// the store on a replica set, not a mongos. WatchLag must monitor that set (it used to fail
// with "config.shards lists no shard" and leave every read on the primary).
func TestWatchLagOnPlainReplicaSetMonitorsTheSetItself(t *testing.T) {
	set := readrouting.LiveSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	routes := &routeLog{}
	s := openStore(t, ctx, set.URI(), routes)
	if err := s.WatchLag(ctx, set.URI(), 250*time.Millisecond); err != nil {
		t.Fatalf("WatchLag on the replica set %s: %v", set.URI(), err)
	}
	seedProduct(t, ctx, s)
	var d readrouting.Decision
	eventually.True(t, 30*time.Second, "a product page read routed to a secondary", func() bool {
		mark := routes.mark()
		if _, err := s.Products().GetProduct(ctx, "p1"); err != nil {
			t.Fatal(err)
		}
		d = routes.since(mark)[0]
		return d.Target == readrouting.Secondary
	})
	snap := s.LagSnapshot()
	if len(snap.Errors) > 0 || len(snap.Members) != len(set.Hosts()) {
		t.Fatalf("snapshot %+v, want the %d members of %s", snap, len(set.Hosts()), set.Name())
	}
	for _, m := range snap.Members {
		if m.Shard != set.Name() || !m.Known || m.Unreachable {
			t.Errorf("member %+v: want set %s, known, reachable", m, set.Name())
		}
		t.Logf("%s %s %s lag %s", m.Shard, m.Host, m.State, m.Lag)
	}
	t.Logf("product page: %s (%s)", d.Target, d.Reason)
}

// fixture is a store opened like `serve` does (mongo.Open + WatchLagWith on the set URI, lag
// measured every 500 ms), a second store B on the same database and lag monitor whose client
// records which member served each command (for (c): where the bytes went, not only what the
// policy said), and a writer inserting a timestamped tick into the primary every 50 ms.
type fixture struct {
	set                *launcher.Set
	a, b               *smongo.Store
	routes, bRoutes    *routeLog
	cmds               *cmdLog
	writer             *tickWriter
	primaryHost, xHost string
	x                  int               // the secondary the test makes lag
	ticks              *mongo.Collection // the ticks as member x shows them (direct connection)
	timeouts           int               // budgeted reads that hung on a stopped member
}

func newFixture(t *testing.T, ctx context.Context) *fixture {
	t.Helper()
	f := &fixture{set: readrouting.LiveSet(t), routes: &routeLog{}, bRoutes: &routeLog{}}
	primary := f.set.Primary(ctx)
	if primary < 0 {
		t.Fatal("no primary")
	}
	hosts := f.set.Hosts()
	f.x = (primary + 1) % len(hosts)
	f.primaryHost, f.xHost = hosts[primary], hosts[f.x]
	f.a = openStore(t, ctx, f.set.URI(), f.routes)
	if err := f.a.WatchLagWith(ctx, f.set.URI(), smongo.LagOptions{Interval: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	seedProduct(t, ctx, f.a)
	db := f.a.Database().Name()
	f.cmds = &cmdLog{db: db}
	bc, err := mongo.Connect(options.Client().ApplyURI(f.set.URI()).SetMonitor(&event.CommandMonitor{Started: f.cmds.started}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bc.Disconnect(context.Background()) })
	f.b = smongo.New(bc, smongo.Options{Database: db, Lag: f.a.LagSnapshot, OnRoute: f.bRoutes.add})
	xc, err := mongo.Connect(options.Client().ApplyURI(f.set.MemberURI(f.x)).SetReadPreference(readpref.SecondaryPreferred()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = xc.Disconnect(context.Background()) })
	f.ticks = xc.Database(db).Collection("ticks")
	f.writer = startTickWriter(t, f.set.URI(), db)
	eventually.True(t, 10*time.Second, "the writer's first second of ticks", func() bool { return f.writer.written() >= 20 })
	return f
}

// budgeted does one product page and one category search through store A, each bounded (a
// read routed to a stopped member before the policy reacts hangs until its timeout), and
// returns their routing decisions.
func (f *fixture) budgeted(t *testing.T, ctx context.Context) (page, search readrouting.Decision) {
	t.Helper()
	mark := f.routes.mark()
	rctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err := f.a.Products().GetProduct(rctx, "p1")
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		f.timeouts++
	} else if err != nil {
		t.Errorf("product page: %v", err)
	}
	rctx, cancel = context.WithTimeout(ctx, 1500*time.Millisecond)
	_, err = f.a.Products().SearchProducts(rctx, catalog.Search{Category: category, Page: paging.Request{Limit: 10}})
	cancel()
	if errors.Is(err, context.DeadlineExceeded) {
		f.timeouts++
	} else if err != nil {
		t.Errorf("category search: %v", err)
	}
	ds := f.routes.since(mark)
	if len(ds) != 2 {
		t.Fatalf("%d routing decisions for two reads: %+v", len(ds), ds)
	}
	return ds[0], ds[1]
}

func bothOn(target readrouting.Target, page, search readrouting.Decision) bool {
	return page.Target == target && search.Target == target
}

// waitSecondaries waits until both budgeted reads go to secondaries and returns how long.
func (f *fixture) waitSecondaries(t *testing.T, ctx context.Context, limit time.Duration, what string) (time.Duration, readrouting.Decision) {
	t.Helper()
	start := time.Now()
	var page, search readrouting.Decision
	eventually.True(t, limit, what, func() bool {
		page, search = f.budgeted(t, ctx)
		return bothOn(readrouting.Secondary, page, search)
	})
	return time.Since(start), page
}

// nextSnapshot waits for a lag snapshot measured after both since and after.
func (f *fixture) nextSnapshot(t *testing.T, since, after time.Time) readrouting.LagSnapshot {
	t.Helper()
	var snap readrouting.LagSnapshot
	eventually.True(t, 5*time.Second, "a new lag snapshot", func() bool {
		snap = f.a.LagSnapshot()
		return snap.MeasuredAt.After(since) && snap.MeasuredAt.After(after)
	})
	return snap
}

// sample logs and checks one (measured, truth) pair of member x, and routes two budgeted reads.
type sampler struct {
	f         *fixture
	samples   int
	worstDiff time.Duration
	leftAfter time.Duration // since the lag began; 0 while reads are on secondaries
	leftTruth time.Duration
	leftWhy   string
}

func (s *sampler) sample(t *testing.T, ctx context.Context, snap readrouting.LagSnapshot, newest tick, began time.Time) (truth time.Duration) {
	t.Helper()
	m, ok := snap.Member(s.f.xHost)
	if !ok {
		t.Fatalf("snapshot lacks %s: %+v", s.f.xHost, snap)
	}
	truth = snap.MeasuredAt.Sub(newest.TS)
	diff := m.Lag - truth
	s.worstDiff = max(s.worstDiff, diff.Abs())
	s.samples++
	t.Logf("sample %2d at +%-6s measured lag %-7s truth %-7s diff %+4dms (%s, known=%t, unreachable=%t, heard %s ago)",
		s.samples, snap.MeasuredAt.Sub(began).Round(time.Millisecond), m.Lag.Round(time.Millisecond),
		truth.Round(time.Millisecond), diff.Milliseconds(), m.State, m.Known, m.Unreachable, m.HeardAgo.Round(time.Millisecond))
	if diff.Abs() > time.Second {
		t.Errorf("sample %d: measured lag %s is %s away from the truth %s (limit 1 s)", s.samples, m.Lag, diff, truth)
	}
	page, search := s.f.budgeted(t, ctx)
	switch {
	case s.leftAfter == 0 && bothOn(readrouting.Primary, page, search):
		s.leftAfter, s.leftTruth, s.leftWhy = time.Since(began), time.Since(newest.TS), page.Reason
		t.Logf("budgeted reads left the secondaries %s after the lag began, true lag then %s: %s",
			s.leftAfter.Round(time.Millisecond), s.leftTruth.Round(time.Millisecond), page.Reason)
	case s.leftAfter != 0 && !bothOn(readrouting.Primary, page, search):
		t.Errorf("a budgeted read went back to a secondary while %s lags: %s (%s) / %s (%s)",
			s.f.xHost, page.Target, page.Reason, search.Target, search.Reason)
	case s.leftAfter == 0 && truth > budget:
		t.Errorf("true lag %s is past the %s budget but budgeted reads still go to secondaries: %s / %s",
			truth.Round(time.Millisecond), budget, page.Reason, search.Reason)
	}
	return truth
}

// TestStoppedSecondaryLagTracksTruthAndBudgetedReadsFallBackToPrimary freezes one secondary
// (SIGSTOP, Set.Pause) while the writer inserts a timestamped tick into the primary every
// 50 ms, and checks through the fixture's stores:
//
//	(a) the frozen member's lag in the monitor's snapshots stays within 1 s of the truth,
//	    truth = snapshot.MeasuredAt − ts of the newest tick visible on that member;
//	(b) 5 s-budget reads (product page, category search) leave the secondaries no later than
//	    its lag passes the budget, stay on the primary while it is stopped, and return to the
//	    secondaries after SIGCONT once it has caught up;
//	(c) stock, the checkout price and the "is it paid?" answer are read on the primary only,
//	    while the secondaries are healthy, while one is stopped, and after.
//
// How the truth is known while the member cannot answer (a frozen mongod reads nothing): just
// before the SIGSTOP the writer is held, the test waits until a direct read on that member
// (Set.MemberURI, readPreference secondaryPreferred) shows the writer's last tick W, and only
// then freezes it and releases the writer. Nothing newer than W existed when it stopped, and a
// stopped process applies nothing, so W is exactly its newest visible tick for the whole
// freeze. Right after SIGCONT the member is read again as a cross-check.
//
// A frozen member also stops sending heartbeats, so the primary stops hearing from it at about
// the time its lag passes the budget; whichever comes first moves the reads (the reason is
// logged). TestLaggingReachableSecondary isolates the lag rule.
func TestStoppedSecondaryLagTracksTruthAndBudgetedReadsFallBackToPrimary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := newFixture(t, ctx)

	took, page := f.waitSecondaries(t, ctx, 30*time.Second, "5 s-budget reads on secondaries with every member healthy")
	t.Logf("healthy: budgeted reads on secondaries after %s (%s)", took.Round(time.Millisecond), page.Reason)
	checkPrimaryOnly(t, ctx, "healthy", f, true)

	// Freeze member x with a known newest tick W.
	last := f.writer.hold()
	var frozen tick
	eventually.True(t, 10*time.Second, "member "+f.xHost+" to show the writer's last tick", func() bool {
		var err error
		frozen, err = newestTick(ctx, f.ticks)
		return err == nil && frozen.Seq == last.Seq
	})
	t.Cleanup(func() { _ = f.set.Resume(f.x) }) // whatever happens below
	if err := f.set.Pause(f.x); err != nil {
		f.writer.release()
		t.Fatal(err)
	}
	pausedAt := time.Now()
	f.writer.release()
	t.Logf("SIGSTOP %s (member %d); its newest tick W: #%d at %s (%s before the stop)", f.xHost, f.x,
		frozen.Seq, frozen.TS.Format("15:04:05.000"), pausedAt.Sub(frozen.TS).Round(time.Millisecond))

	// (a) and (b) while it is stopped: sample until the true lag is 2 s past the budget.
	s := &sampler{f: f}
	var measuredAt time.Time
	for deadline := time.Now().Add(60 * time.Second); ; {
		snap := f.nextSnapshot(t, pausedAt, measuredAt)
		measuredAt = snap.MeasuredAt
		truth := s.sample(t, ctx, snap, frozen, pausedAt)
		if s.leftAfter != 0 && s.samples >= 8 && truth >= budget+2*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d samples, budgeted reads left the secondaries: %t", s.samples, s.leftAfter != 0)
		}
	}
	t.Logf("(a) %d samples while stopped: worst |measured − truth| %s", s.samples, s.worstDiff.Round(time.Millisecond))
	checkPrimaryOnly(t, ctx, "member stopped", f, false)

	// Resume; cross-check the frozen state, then wait for the reads to come back.
	stoppedFor := time.Since(pausedAt)
	if err := f.set.Resume(f.x); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	if after, err := newestTick(ctx, f.ticks); err == nil {
		t.Logf("first read on %s after SIGCONT (+%s): newest tick #%d (W was #%d; anything newer was fetched since)",
			f.xHost, time.Since(resumedAt).Round(time.Millisecond), after.Seq, frozen.Seq)
		if after.Seq < frozen.Seq {
			t.Errorf("after SIGCONT %s shows tick #%d, older than W #%d it showed before the stop", f.xHost, after.Seq, frozen.Seq)
		}
	}
	back, page := f.waitSecondaries(t, ctx, 45*time.Second, "5 s-budget reads back on secondaries after SIGCONT")
	m, _ := f.a.LagSnapshot().Member(f.xHost)
	t.Logf("(b) stopped for %s; budgeted reads left the secondaries %s after the stop (true lag %s, budget %s) and came back %s after SIGCONT (lag of %s then %s: %s); %d reads timed out on the stopped member before the policy reacted",
		stoppedFor.Round(time.Millisecond), s.leftAfter.Round(time.Millisecond), s.leftTruth.Round(time.Millisecond), budget,
		back.Round(time.Millisecond), f.xHost, m.Lag.Round(time.Millisecond), page.Reason, f.timeouts)
	if !m.Known || m.Unreachable || m.Lag > budget {
		t.Errorf("reads came back while %s is %+v", f.xHost, m)
	}
	checkPrimaryOnly(t, ctx, "after SIGCONT", f, true)
}

// TestLaggingReachableSecondaryOverBudgetMovesBudgetedReadsToPrimary makes one secondary stop
// replicating while it keeps answering heartbeats and reads (the stopReplProducer fail point,
// enabled by LiveSet's enableTestCommands): the lag rule alone must move the reads. Here the
// truth is read directly at every sample: the member applies nothing, so the newest tick it
// shows after a snapshot is the newest it showed when the snapshot was taken.
func TestLaggingReachableSecondaryOverBudgetMovesBudgetedReadsToPrimary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f := newFixture(t, ctx)
	f.waitSecondaries(t, ctx, 30*time.Second, "5 s-budget reads on secondaries with every member healthy")

	admin := f.ticks.Database().Client().Database("admin")
	failPoint := func(mode string) error {
		return admin.RunCommand(ctx, bson.D{{Key: "configureFailPoint", Value: "stopReplProducer"}, {Key: "mode", Value: mode}}).Err()
	}
	t.Cleanup(func() { _ = failPoint("off") })
	if err := failPoint("alwaysOn"); err != nil {
		t.Fatalf("stop replication on %s: %v", f.xHost, err)
	}
	stoppedAt := time.Now()
	s := &sampler{f: f}
	var measuredAt time.Time
	var newest tick
	for deadline := time.Now().Add(60 * time.Second); ; {
		snap := f.nextSnapshot(t, stoppedAt, measuredAt)
		measuredAt = snap.MeasuredAt
		var err error
		if newest, err = newestTick(ctx, f.ticks); err != nil {
			t.Fatalf("read %s: %v", f.xHost, err)
		}
		if m, _ := snap.Member(f.xHost); !m.Known || m.Unreachable {
			t.Errorf("%s answers heartbeats, yet %+v", f.xHost, m)
		}
		truth := s.sample(t, ctx, snap, newest, stoppedAt)
		// The policy must not be needlessly early either: with 2.5 s of true lag the bound
		// (lag + snapshot age + 0.5 s) is still well within 5 s.
		if s.leftAfter != 0 && truth <= 2500*time.Millisecond {
			t.Errorf("budgeted reads left the secondaries at a true lag of %s: %s", truth, s.leftWhy)
		}
		if s.leftAfter != 0 && s.samples >= 8 && truth >= budget+2*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d samples, budgeted reads left the secondaries: %t", s.samples, s.leftAfter != 0)
		}
	}
	if !strings.Contains(s.leftWhy, "> budget 5s") {
		t.Errorf("reads left the secondaries for %q, want the lag rule (> budget 5s)", s.leftWhy)
	}
	t.Logf("(a) %d samples: worst |measured − truth| %s", s.samples, s.worstDiff.Round(time.Millisecond))
	checkPrimaryOnly(t, ctx, "secondary lagging", f, false)
	if err := failPoint("off"); err != nil {
		t.Fatal(err)
	}
	back, page := f.waitSecondaries(t, ctx, 45*time.Second, "5 s-budget reads back on secondaries after replication resumed")
	t.Logf("(b) budgeted reads left the secondaries %s after replication stopped (true lag %s, budget %s) and came back %s after it resumed (%s)",
		s.leftAfter.Round(time.Millisecond), s.leftTruth.Round(time.Millisecond), budget, back.Round(time.Millisecond), page.Reason)
}

// checkPrimaryOnly is (c): the policy's decisions for the primary-only reads on the current
// snapshot, and where store B's commands actually went for a checkout (stock taken and price
// read in one findAndModify), a stock change, and the paid-status reads around a payment.
// healthy also checks that B's budgeted reads do reach a secondary, so the recording can tell.
func checkPrimaryOnly(t *testing.T, ctx context.Context, label string, f *fixture, healthy bool) {
	t.Helper()
	b, cmds, routes, primaryHost := f.b, f.cmds, f.bRoutes, f.primaryHost
	snap := b.LagSnapshot()
	p := readrouting.NewPolicy()
	for _, op := range []readrouting.Operation{readrouting.OpOrderStatusPaid, readrouting.OpStock, readrouting.OpCheckoutPrice} {
		if d := p.Decide(op, snap, time.Now()); d.Target != readrouting.Primary {
			t.Errorf("%s: %s → %s (%s), want primary", label, op, d.Target, d.Reason)
		}
	}
	onPrimary := func(what string, evs []cmdEvent) {
		t.Helper()
		if len(evs) == 0 {
			t.Errorf("%s: %s sent no command", label, what)
		}
		for _, ev := range evs {
			if ev.host != primaryHost {
				t.Errorf("%s: %s sent %s %s to %s, not the primary %s", label, what, ev.name, ev.coll, ev.host, primaryHost)
			}
		}
	}
	id := fmt.Sprintf("%s-%d", strings.ReplaceAll(label, " ", "-"), time.Now().UnixNano())

	if healthy {
		mark, rmark := cmds.mark(), routes.mark()
		if _, err := b.Products().GetProduct(ctx, "p1"); err != nil {
			t.Fatal(err)
		}
		if d := routes.since(rmark); len(d) == 1 && d[0].Target == readrouting.Secondary {
			if evs := cmds.since(mark); len(evs) == 0 || evs[0].host == primaryHost {
				t.Errorf("%s: a product page routed to a secondary was served by %v", label, evs)
			}
		}
	}

	mark := cmds.mark()
	o, created, err := b.Orders().Place(ctx, order.Placement{OrderID: id, UserID: "u-" + id, CartID: "c-" + id,
		CartOwner: "u-" + id, Zone: zone, IdempotencyKey: id, At: time.Now().UTC(),
		Lines: []order.Line{{ProductID: "p1", Category: category, Quantity: 1}}})
	if err != nil || !created || o.Items[0].UnitPrice != 1999 {
		t.Fatalf("%s: checkout: %+v created=%t err=%v", label, o, created, err)
	}
	evs := cmds.since(mark)
	if !hasCommand(evs, "findAndModify", "products") {
		t.Errorf("%s: checkout read no stock/price with findAndModify: %v", label, evs)
	}
	onPrimary("checkout (stock and price)", evs)

	mark = cmds.mark()
	if _, err := b.Products().AdjustStock(ctx, catalog.Ref{ID: "p1", Category: category}, zone, 1); err != nil {
		t.Fatal(err)
	}
	onPrimary("stock change", cmds.since(mark))

	// Not paid yet: whatever member the status read starts on, the answer "created" (not paid)
	// must come from the primary.
	mark = cmds.mark()
	got, err := b.Orders().GetOrder(ctx, id)
	if err != nil || got.Status != order.Created {
		t.Fatalf("%s: order %s: %+v, %v", label, id, got, err)
	}
	if ev, ok := lastCommand(cmds.since(mark), "find", "orders"); !ok || ev.host != primaryHost {
		t.Errorf("%s: the not-paid answer for %s was read on %s, not the primary %s", label, id, ev.host, primaryHost)
	}
	mark = cmds.mark()
	if _, err := b.Orders().Transition(ctx, id, order.Paid, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	onPrimary("payment", cmds.since(mark))
	if got, err := b.Orders().GetOrder(ctx, id); err != nil || got.Status != order.Paid {
		t.Errorf("%s: order %s after payment: %s, %v", label, id, got.Status, err)
	}
	t.Logf("(c) %s: checkout, stock change, not-paid status and payment all on the primary %s", label, primaryHost)
}

// openStore opens a store on a fresh database, dropped when the test ends.
func openStore(t *testing.T, ctx context.Context, uri string, routes *routeLog) *smongo.Store {
	t.Helper()
	db := fmt.Sprintf("routing_live_%d", time.Now().UnixNano())
	s, err := smongo.Open(ctx, smongo.Options{URI: uri, Database: db, OnRoute: routes.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Database().Drop(dctx)
		_ = s.Close()
	})
	return s
}

func seedProduct(t *testing.T, ctx context.Context, s *smongo.Store) {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	err := s.Products().CreateProduct(ctx, catalog.Product{ID: "p1", Name: "Desk lamp", Category: category,
		Price: 1999, Stock: map[string]int64{zone: 1000}, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
}

// routeLog records the routing decisions of a store (Options.OnRoute).
type routeLog struct {
	mu sync.Mutex
	ds []readrouting.Decision
}

func (r *routeLog) add(d readrouting.Decision) { r.mu.Lock(); r.ds = append(r.ds, d); r.mu.Unlock() }
func (r *routeLog) mark() int                  { r.mu.Lock(); defer r.mu.Unlock(); return len(r.ds) }
func (r *routeLog) since(i int) []readrouting.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]readrouting.Decision(nil), r.ds[i:]...)
}

// cmdLog records, for every command on the test database (and transaction commits), the
// member that served it: the driver's connection id is "host:port[-n]".
type cmdLog struct {
	db  string
	mu  sync.Mutex
	evs []cmdEvent
}

type cmdEvent struct{ name, coll, host string }

func (c *cmdLog) started(_ context.Context, e *event.CommandStartedEvent) {
	if e.DatabaseName != c.db && e.CommandName != "commitTransaction" && e.CommandName != "abortTransaction" {
		return
	}
	host, _, _ := strings.Cut(e.ConnectionID, "[")
	coll, _ := e.Command.Index(0).Value().StringValueOK()
	c.mu.Lock()
	c.evs = append(c.evs, cmdEvent{name: e.CommandName, coll: coll, host: host})
	c.mu.Unlock()
}

func (c *cmdLog) mark() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.evs) }
func (c *cmdLog) since(i int) []cmdEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]cmdEvent(nil), c.evs[i:]...)
}

func hasCommand(evs []cmdEvent, name, coll string) bool {
	_, ok := lastCommand(evs, name, coll)
	return ok
}

func lastCommand(evs []cmdEvent, name, coll string) (cmdEvent, bool) {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].name == name && evs[i].coll == coll {
			return evs[i], true
		}
	}
	return cmdEvent{}, false
}

// tick is one timestamped document of the writer.
type tick struct {
	Seq int64     `bson:"_id"`
	TS  time.Time `bson:"ts"`
}

func newestTick(ctx context.Context, ticks *mongo.Collection) (tick, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var tk tick
	err := ticks.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}})).Decode(&tk)
	return tk, err
}

// tickWriter inserts {_id: seq, ts: now} into ticks on the primary every 50 ms (w:1) until the
// test ends; hold stops it between two inserts.
type tickWriter struct {
	mu     sync.Mutex
	last   tick
	failed int
}

func (w *tickWriter) written() int64 { w.mu.Lock(); defer w.mu.Unlock(); return w.last.Seq }

func startTickWriter(t *testing.T, uri, db string) *tickWriter {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	coll := c.Database(db).Collection("ticks", options.Collection().SetWriteConcern(writeconcern.W1()))
	w := &tickWriter{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		every := time.NewTicker(50 * time.Millisecond)
		defer every.Stop()
		for seq := int64(1); ; seq++ {
			w.mu.Lock()
			tk := tick{Seq: seq, TS: time.Now()}
			ictx, icancel := context.WithTimeout(ctx, 2*time.Second)
			if _, err := coll.InsertOne(ictx, tk); err == nil {
				w.last = tk
			} else if ctx.Err() == nil {
				w.failed++
			}
			icancel()
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-every.C:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if w.failed > 0 {
			t.Logf("tick writer: %d inserts failed", w.failed)
		}
		_ = c.Disconnect(context.Background())
	})
	return w
}

// hold stops the writer after its current insert and returns the last tick it wrote.
func (w *tickWriter) hold() tick { w.mu.Lock(); return w.last }
func (w *tickWriter) release()   { w.mu.Unlock() }
