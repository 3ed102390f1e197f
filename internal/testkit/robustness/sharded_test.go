package robustness

// The sharded-cluster target: the router-less cluster (no mongos can be had here) with the real
// balancer migrating chunks off shard A while shard A's primary is cut off by iptables. The
// clients write through shardtest.Router's versioned writes, which do what mongos does for a
// write: route by the cached chunk map, attach the shard version, refresh and resend on
// StaleConfig. The hot-shard monitor's MongoDB collectors scrape the cluster throughout.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/mongodb/shardtest"
	"github.com/shardmart/shardmart/internal/monitor"
	"github.com/shardmart/shardmart/internal/monitor/mongocollect"
)

const (
	// shardedSeed documents of about 1 KB are loaded onto shard A with the balancer off: 12 MB
	// against a 1 MB chunk size, so that the balancer, once on, keeps migrating for tens of
	// seconds (6.0.5 balances data size: until the shards differ by less than 3 chunk sizes).
	shardedSeed    = 12_000
	shardedPad     = 1000
	shardedCounted = 100 // seed documents the update clients increment, spread over the key range
	// shardedSplit: shard B owns the keys from here up before the balancer starts.
	shardedSplit = 11_000
	// shardedKeys bounds the inserted keys: one in five lands above the seed, on shard B.
	shardedKeys = 14_000
	// shardedWindow is how long shard A's primary stays cut off: past an election (2 s
	// timeout) and the router's refresh, with the migration in flight failing on it.
	shardedWindow = 10 * time.Second
	// shardedSettle bounds each wait for the balancer to settle after the heal (compliant, then
	// no orphans): a handful of 1 MB migrations, each 1-3 s on this loaded machine.
	shardedSettle = 90 * time.Second
	// shardedOpTimeout bounds each write: past it the outcome is unknown.
	shardedOpTimeout = 3 * time.Second
	scrapeEvery      = 500 * time.Millisecond
)

// shardedOp is one write as its client saw it.
type shardedOp struct {
	client    int
	id        string // the document's _id
	update    bool   // an $inc of n on a seed document, else an insert of a new document
	call, ret time.Time
	outcome   outcome
	shard     string // where the router sent it last
	stale     int    // StaleConfig answers before the last send
	err       string
}

// scrape is one scrape of the monitor, as Prometheus would see it.
type scrape struct {
	at, end  time.Time
	err      error
	up       map[string]float64 // shardmart_mongo_shard_up by shard
	memberUp map[string]float64 // shardmart_mongo_shard_member_up by "shard/member"
	failures []string           // collectors whose collector_success was not 1
}

// TestShardedCluster: a config server of 1 member, shard A (sh0) of 3 members, shard B (sh1) of
// 1. Shard A's primary is the one cut off, so it is the smallest set that elects another
// primary without it; shard B only has to exist for chunks to migrate to, and the config
// server (which runs the balancer) is not under test. Traffic: 4 clients insert documents with
// unique ids at random shard keys over the migrating range, 2 clients increment counters on
// seed documents; every write is recorded as acknowledged, refused or unknown. Nemesis: shard
// A's primary cut off (iptables chain and cgroup of the test's own, verified) while a
// migration is in flight, then healed. Checks, once the balancer has settled: every
// acknowledged insert present exactly once among the documents their shard owns, no refused
// insert present, no duplicate, every counter within its acknowledged and unknown increments;
// every scrape succeeded, and one during the cut reported shard A down.
func TestShardedCluster(t *testing.T) {
	t.Parallel()
	cfg := runSettings(t)
	begin := time.Now()
	c := launcher.ClusterForTest(t, launcher.ClusterOptions{
		ShardMembers: []int{3, 1}, BasePort: launcher.RobustnessClusterTestPort, ChunkSizeMB: 1,
		ElectionTimeout: electionTimeout,
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := shardtest.Connect(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	t.Logf("cluster up in %s: %s (3 members), %s (1 member), config server %s", time.Since(begin).Round(100*time.Millisecond), c.Shards[0].Name(), c.Shards[1].Name(), c.ConfigURI())
	for i := range cfg.repeat {
		t.Run(fmt.Sprintf("cut/%d", i), func(t *testing.T) {
			runSharded(t, c, r, cfg, cfg.seed+uint64(i))
		})
	}
}

// runSharded: a collection of its own loaded onto shard A, the balancer on, traffic, the cut
// of shard A's primary for half of cfg.duration (at least shardedWindow) during a migration,
// the heal and the balancer's settling under traffic, then the checks.
func runSharded(t *testing.T, c *launcher.Cluster, r *shardtest.Router, cfg settings, seed uint64) {
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+5*time.Minute)
	defer cancel()
	a, shardA, shardB := c.Shards[0], c.Shards[0].Name(), c.Shards[1].Name()
	// A repeat starts from a healthy shard A with its usual primary, as the first run does.
	if err := restore(ctx, a); err != nil {
		t.Fatalf("restore %s: %v", shardA, err)
	}
	window := max(cfg.duration/2, shardedWindow)
	db := runName("shardrob")
	t.Cleanup(func() {
		// The next repeat's migrations are then its own collection's only.
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = r.RunCommand(dctx, db, bson.D{{Key: "dropDatabase", Value: 1}})
	})
	ns := db + ".items"
	for _, cmd := range []bson.D{
		{{Key: "enableSharding", Value: db}, {Key: "primaryShard", Value: shardA}},
		{{Key: "shardCollection", Value: ns}, {Key: "key", Value: bson.D{{Key: "k", Value: int32(1)}}}},
	} {
		if _, err := r.RunCommand(ctx, "admin", cmd); err != nil {
			t.Fatal(err)
		}
	}
	shardtest.BalancerOff(ctx, t, r)
	if err := loadSeed(ctx, r, ns, shardA); err != nil {
		t.Fatal(err)
	}
	// Shard B owns the top of the key range from the start, so that writes routed there are
	// acknowledged while shard A fails over.
	if _, err := r.RunCommand(ctx, "admin", bson.D{{Key: "moveRange", Value: ns}, {Key: "min", Value: bson.D{{Key: "k", Value: int64(shardedSplit)}}},
		{Key: "max", Value: bson.D{{Key: "k", Value: bson.MaxKey{}}}}, {Key: "toShard", Value: shardB}}); err != nil {
		t.Fatal(err)
	}

	mc, err := mongocollect.Open(mongocollect.Options{URI: c.ConfigURI(), ChunkMoveWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Close(context.Background()) })
	reg := monitor.NewRegistry(monitor.Options{Collectors: mc.Collectors(), ScrapeTimeout: 5 * time.Second, HotFloorBytes: 1 << 20})

	runStart := time.Now()
	shardtest.BalancerOn(ctx, t, r)
	tctx, stopTraffic := context.WithTimeout(ctx, cfg.duration+3*time.Minute)
	defer stopTraffic()
	w := &shardedWorkload{r: r, ns: ns}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() { w.client(tctx, i, rand.New(rand.NewPCG(seed, uint64(i)))) })
	}
	var scrapes []scrape
	wg.Go(func() { scrapes = scrapeUntil(tctx, reg) })

	from, to, victim := cutDuringMigration(t, ctx, r, a, ns, runStart, window)
	if from.IsZero() {
		stopTraffic()
		wg.Wait()
		return // the nemesis did not take; cutDuringMigration said why
	}
	t.Logf("%s primary (member %d) cut off from +%s to +%s", shardA, victim, from.Sub(runStart).Round(time.Millisecond), to.Sub(runStart).Round(time.Millisecond))
	// The writes go on while the set heals and the balancer finishes what the cut interrupted,
	// so that they race migrations after the heal too; then the last orphans must go.
	settleStart := time.Now()
	err = restore(ctx, a)
	if err == nil {
		err = balancedUnderTraffic(ctx, r, ns, runStart)
	}
	_ = wait(tctx, time.Second)
	stopTraffic()
	wg.Wait()
	if err != nil {
		t.Fatalf("%s did not heal and settle within %s: %v", shardA, shardedSettle, err)
	}
	sctx, cancelSettle := context.WithTimeout(ctx, shardedSettle)
	defer cancelSettle()
	if _, _, err := r.WaitSettled(sctx, ns); err != nil {
		t.Fatalf("the balancer did not settle within %s: %v", shardedSettle, err)
	}
	t.Logf("%s healed and the balancer settled %s after the heal", shardA, time.Since(settleStart).Round(100*time.Millisecond))

	moves, err := changelogEntries(ctx, r, ns, runStart)
	if err != nil {
		t.Fatal(err)
	}
	checkMigrations(t, moves, from, to)
	checkShardedEffect(t, w.history(), from, to)
	checkScrapes(t, scrapes, shardA, a.Members()[victim].Host, from, to)
	checkDocuments(t, ctx, r, ns, w.history())
	t.Logf("run took %s in all; load %s", time.Since(begin).Round(100*time.Millisecond), loadavg())
}

// balancedUnderTraffic waits, for shardedSettle at most, until the balancer has committed a
// migration of ns since since and calls ns balanced.
func balancedUnderTraffic(ctx context.Context, r *shardtest.Router, ns string, since time.Time) error {
	sctx, cancel := context.WithTimeout(ctx, shardedSettle)
	defer cancel()
	return eventually.Until(sctx, func() error {
		moves, err := changelog(sctx, r, ns, since)
		if err != nil {
			return eventually.Stop(err)
		}
		c, err := r.Compliance(sctx, ns)
		if err != nil {
			return err
		}
		if moves["moveChunk.commit"] == 0 || !c.Compliant {
			return fmt.Errorf("migrations %v, compliant %t (%s)", moves, c.Compliant, c.Violation)
		}
		return nil
	})
}

// loadSeed places the seed documents, all on shard A (the balancer is off, so the one chunk
// stays where the collection was created).
func loadSeed(ctx context.Context, r *shardtest.Router, ns, shardA string) error {
	pad := strings.Repeat("x", shardedPad)
	docs := make([]bson.D, shardedSeed)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: seedID(i)}, {Key: "k", Value: int64(i)}, {Key: "n", Value: int64(0)}, {Key: "pad", Value: pad}}
	}
	for lo := 0; lo < len(docs); lo += 2000 {
		got, err := r.Place(ctx, ns, docs[lo:min(lo+2000, len(docs))])
		if err != nil {
			return err
		}
		if len(got) != 1 || got[shardA] == 0 {
			return fmt.Errorf("seed documents went to %v, want all on %s", got, shardA)
		}
	}
	return nil
}

func seedID(i int) string { return fmt.Sprintf("s-%05d", i) }

// countedKey is the shard key of the i-th counted seed document: spread over the whole range,
// so some are on chunks that migrate.
func countedKey(i int) int64 { return int64(i * (shardedSeed / shardedCounted)) }

type shardedWorkload struct {
	r  *shardtest.Router
	ns string

	mu  sync.Mutex
	ops []shardedOp
}

// client 0-3 insert new documents (3 above shardedSplit only), 4-5 increment counted seed
// documents, until ctx ends.
func (w *shardedWorkload) client(ctx context.Context, c int, rng *rand.Rand) {
	_, coll, _ := strings.Cut(w.ns, ".")
	for seq := 0; ctx.Err() == nil; seq++ {
		var key int64
		var id string
		var cmd bson.D
		update := c >= 4
		if update {
			i := rng.IntN(shardedCounted)
			key, id = countedKey(i), seedID(int(countedKey(i)))
			cmd = bson.D{{Key: "update", Value: coll}, {Key: "updates", Value: bson.A{bson.D{
				{Key: "q", Value: bson.D{{Key: "_id", Value: id}, {Key: "k", Value: key}}},
				{Key: "u", Value: bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(1)}}}}},
			}}}}
		} else {
			// Keys anywhere: most inserts land on chunks being migrated. Client 3 keeps to shard
			// B's range, so that some writes are acknowledged however long shard A stalls.
			lo := int64(0)
			if c == 3 {
				lo = shardedSplit
			}
			key, id = lo+rng.Int64N(shardedKeys-lo), fmt.Sprintf("c%d-%d", c, seq)
			cmd = bson.D{{Key: "insert", Value: coll}, {Key: "documents", Value: bson.A{
				bson.D{{Key: "_id", Value: id}, {Key: "k", Value: key}}}}}
		}
		o := shardedOp{client: c, id: id, update: update, call: time.Now()}
		octx, cancel := context.WithTimeout(ctx, shardedOpTimeout)
		routed, n, err := w.r.VersionedWrite(octx, w.ns, bson.D{{Key: "k", Value: key}}, cmd)
		cancel()
		o.ret, o.shard, o.stale = time.Now(), routed.Shard, routed.Stale
		o.outcome = classify(err)
		if err != nil {
			o.err = err.Error()
		} else if n != 1 {
			// Nothing matched or inserted, and no error: a document the router could not find.
			o.outcome, o.err = outcomeRefused, fmt.Sprintf("n = %d", n)
		}
		if ctx.Err() != nil && o.outcome != outcomeAcked {
			// Cut short by the end of the run: it may have been applied all the same.
			o.outcome = outcomeUnknown
		}
		w.mu.Lock()
		w.ops = append(w.ops, o)
		w.mu.Unlock()
		_ = wait(ctx, time.Duration(5+rng.IntN(10))*time.Millisecond)
	}
}

func (w *shardedWorkload) history() []shardedOp {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ops)
}

// classify: a write the shard answered with a write error, or that was refused before it ran
// (no primary to send it to, a member that is not primary), was not applied; a write whose
// write concern failed was applied on one member and may or may not survive; anything else (a
// timeout, a lost connection) has an unknown outcome.
func classify(err error) outcome {
	var we *shardtest.WriteError
	var sel topology.ServerSelectionError
	var ce mongo.CommandError
	switch {
	case err == nil:
		return outcomeAcked
	case errors.As(err, &we) && !we.Concern, errors.As(err, &sel):
		return outcomeRefused
	case errors.As(err, &ce) && (ce.HasErrorCode(10107) || ce.HasErrorCode(13435)): // NotWritablePrimary, NotPrimaryNoSecondaryOk
		return outcomeRefused
	}
	return outcomeUnknown
}

// cutDuringMigration waits until a migration of ns is in flight, then cuts shard A's
// primary off for window and heals it. It returns the cut's window and victim, or zero
// times after failing the test when no migration started or the cut did not take.
func cutDuringMigration(t *testing.T, ctx context.Context, r *shardtest.Router, a *launcher.Set, ns string, since time.Time, window time.Duration) (from, to time.Time, victim int) {
	t.Helper()
	mctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	if err := eventually.Until(mctx, func() error {
		moves, err := changelog(mctx, r, ns, since)
		if err != nil {
			return eventually.Stop(err)
		}
		// A donor logs moveChunk.from when a migration ends, committed or not.
		if moves["moveChunk.start"] <= moves["moveChunk.from"] {
			return fmt.Errorf("no migration in flight: %v", moves)
		}
		return nil
	}); err != nil {
		t.Errorf("no migration of %s in flight within 40 s: %v", ns, err)
		return
	}
	if victim = a.Primary(ctx); victim < 0 {
		t.Errorf("%s has no primary to cut off", a.Name())
		return
	}
	from = time.Now()
	name := fmt.Sprintf("the cut of %s member %d", a.Name(), victim)
	h, err := partitionNemesis(t, ctx, a, victim, window)
	heal := healOnce(t, name, h)
	if err != nil {
		t.Errorf("%s did not take: %v", name, err)
		return time.Time{}, time.Time{}, victim
	}
	_ = wait(ctx, time.Until(from.Add(window)))
	if err := heal(ctx); err != nil {
		t.Errorf("heal %s: %v", name, err)
	}
	return from, time.Now(), victim
}

// move is one config.changelog entry of a migration.
type move struct {
	What string    `bson:"what"`
	Time time.Time `bson:"time"`
}

// changelog counts ns's migration entries (moveChunk.*) since since, by kind.
func changelog(ctx context.Context, r *shardtest.Router, ns string, since time.Time) (map[string]int, error) {
	entries, err := changelogEntries(ctx, r, ns, since)
	out := map[string]int{}
	for _, e := range entries {
		out[e.What]++
	}
	return out, err
}

func changelogEntries(ctx context.Context, r *shardtest.Router, ns string, since time.Time) ([]move, error) {
	cur, err := r.Config.Database("config").Collection("changelog").Find(ctx, bson.D{
		{Key: "ns", Value: ns}, {Key: "what", Value: bson.D{{Key: "$regex", Value: "^moveChunk\\."}}},
		{Key: "time", Value: bson.D{{Key: "$gte", Value: since}}},
	}, options.Find().SetSort(bson.D{{Key: "time", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("read config.changelog: %w", err)
	}
	var out []move
	if err := cur.All(ctx, &out); err != nil {
		return nil, fmt.Errorf("read config.changelog: %w", err)
	}
	return out, nil
}

// checkMigrations fails a run in which no migration was committed (the balancer was not put
// to the test) and logs the migrations by phase: a donor logs moveChunk.start when one begins
// and moveChunk.from when it ends, committed (moveChunk.commit) or not (moveChunk.error).
func checkMigrations(t *testing.T, moves []move, from, to time.Time) {
	t.Helper()
	var kinds [3]map[string]int
	for i := range kinds {
		kinds[i] = map[string]int{}
	}
	for _, m := range moves {
		i := 1
		switch {
		case m.Time.Before(from):
			i = 0
		case m.Time.After(to):
			i = 2
		}
		kinds[i][m.What]++
	}
	inFlight := kinds[0]["moveChunk.start"] - kinds[0]["moveChunk.from"]
	t.Logf("migrations (config.changelog) before / during / after the cut: %v / %v / %v; in flight when it began: %d", kinds[0], kinds[1], kinds[2], inFlight)
	if kinds[0]["moveChunk.commit"]+kinds[1]["moveChunk.commit"]+kinds[2]["moveChunk.commit"] == 0 {
		t.Error("no migration committed during the run")
	}
}

// connID is the driver's connection number in an error, left out so that the same error on
// several connections is counted as one.
var connID = regexp.MustCompile(`\[-?\d+\]`)

// checkShardedEffect fails a run in which the cut left no trace its clients could see, or in
// which no write was acknowledged with its call before, during or after it. A write in flight
// at any moment of the cut counts as during it for failures and stalls.
func checkShardedEffect(t *testing.T, ops []shardedOp, from, to time.Time) {
	t.Helper()
	phase := func(at time.Time) int {
		switch {
		case at.Before(from):
			return 0
		case at.After(to):
			return 2
		}
		return 1
	}
	var p [3]struct{ acked, failed, stalled, stale int }
	errs := map[string]int{} // what the writes in flight during the cut were told
	for _, o := range ops {
		if o.outcome == outcomeAcked {
			p[phase(o.call)].acked++
		}
		i := phase(o.call)
		if !o.ret.Before(from) && !o.call.After(to) {
			i = 1
		}
		if o.outcome != outcomeAcked {
			p[i].failed++
			if i == 1 {
				e := connID.ReplaceAllString(o.err, "")
				errs[o.outcome.String()+": "+e[:min(len(e), 160)]]++
			}
		}
		if o.ret.Sub(o.call) >= stall {
			p[i].stalled++
		}
		p[i].stale += o.stale
	}
	t.Logf("before / during / after the cut: acknowledged writes %d / %d / %d; refused or unknown %d / %d / %d; answers stalled ≥ %s %d / %d / %d; StaleConfig answers %d / %d / %d",
		p[0].acked, p[1].acked, p[2].acked, p[0].failed, p[1].failed, p[2].failed, stall, p[0].stalled, p[1].stalled, p[2].stalled, p[0].stale, p[1].stale, p[2].stale)
	for e, n := range errs {
		t.Logf("during the cut, %d × %s", n, e)
	}
	for i, name := range []string{"before", "during", "after"} {
		if p[i].acked == 0 {
			t.Errorf("no acknowledged write called %s the cut", name)
		}
	}
	if p[1].failed+p[1].stalled == 0 {
		t.Errorf("the cut had no observable effect: no write failed, was left unknown or stalled for %s while it lasted", stall)
	}
}

// scrapeUntil gathers reg every scrapeEvery until ctx ends, as Prometheus would.
func scrapeUntil(ctx context.Context, reg prometheus.Gatherer) []scrape {
	var out []scrape
	for ctx.Err() == nil {
		s := scrape{at: time.Now(), up: map[string]float64{}, memberUp: map[string]float64{}}
		mfs, err := reg.Gather()
		s.end, s.err = time.Now(), err
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				var labels []string // in label name order: member, shard
				for _, lp := range m.GetLabel() {
					labels = append(labels, lp.GetValue())
				}
				label := strings.Join(labels, "/")
				switch mf.GetName() {
				case "shardmart_mongo_shard_up":
					s.up[label] = m.GetGauge().GetValue()
				case "shardmart_mongo_shard_member_up":
					s.memberUp[labels[1]+"/"+labels[0]] = m.GetGauge().GetValue()
				case "shardmart_monitor_collector_success":
					if m.GetGauge().GetValue() != 1 {
						s.failures = append(s.failures, label)
					}
				}
			}
		}
		out = append(out, s)
		_ = wait(ctx, scrapeEvery)
	}
	return out
}

// checkScrapes: no scrape failed or lost a collector, and one that overlapped the cut reported
// the shard down (its primary did not answer the ping) or the cut member unreachable (the new
// primary's view, once elected).
func checkScrapes(t *testing.T, scrapes []scrape, shard, member string, from, to time.Time) {
	t.Helper()
	var during, shardDown, memberDown int
	var longest time.Duration
	for _, s := range scrapes {
		longest = max(longest, s.end.Sub(s.at))
		if s.err != nil || len(s.failures) > 0 {
			t.Errorf("scrape at %s failed: %v, failed collectors %v", s.at.Format("15:04:05.000"), s.err, s.failures)
		}
		if _, ok := s.up[shard]; !ok && s.err == nil {
			t.Errorf("scrape at %s has no shard_up for %s: %v", s.at.Format("15:04:05.000"), shard, s.up)
		}
		if s.end.Before(from) || s.at.After(to) {
			continue
		}
		during++
		if s.up[shard] == 0 {
			shardDown++
		} else if v, ok := s.memberUp[shard+"/"+member]; ok && v == 0 {
			memberDown++
		}
	}
	t.Logf("%d scrapes (longest %s), %d overlapping the cut: %d with %s down, %d with %s up and member %s unreachable", len(scrapes), longest.Round(time.Millisecond), during, shardDown, shard, memberDown, shard, member)
	if shardDown+memberDown == 0 {
		t.Errorf("no scrape overlapping the cut reported %s down or its member %s unreachable", shard, member)
	}
}

// checkDocuments reads every shard once the balancer has settled and keeps, of each shard's
// documents, those whose chunk config.chunks gives to that shard: a document on another shard
// is an orphan (a migrated range not yet deleted, or a write that reached a former owner) and
// is counted apart. Then every seed document and acknowledged insert is there exactly once,
// no refused insert is, and each counter lies between its acknowledged increments and those
// plus the unknown ones.
func checkDocuments(t *testing.T, ctx context.Context, r *shardtest.Router, ns string, ops []shardedOp) {
	t.Helper()
	info, err := r.Collection(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	dbName, coll, _ := strings.Cut(ns, ".")
	seen := map[string]int{}
	counters := map[string]int64{}
	orphans := 0
	for _, shard := range r.ShardIDs() {
		c := r.Shards[shard].Database(dbName, options.Database().SetReadConcern(readconcern.Majority())).Collection(coll)
		cur, err := c.Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "k", Value: 1}, {Key: "n", Value: 1}}))
		if err != nil {
			t.Fatalf("read %s on %s: %v", ns, shard, err)
		}
		var docs []struct {
			ID string `bson:"_id"`
			K  int64  `bson:"k"`
			N  int64  `bson:"n"`
		}
		if err := cur.All(ctx, &docs); err != nil {
			t.Fatalf("read %s on %s: %v", ns, shard, err)
		}
		for _, d := range docs {
			owner, err := info.Owner(bson.D{{Key: "k", Value: d.K}})
			if err != nil {
				t.Fatal(err)
			}
			if owner != shard {
				orphans++
				continue
			}
			seen[d.ID]++
			counters[d.ID] = d.N
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("document %s is owned %d times", id, n)
		}
	}
	for i := range shardedSeed {
		if seen[seedID(i)] != 1 {
			t.Errorf("seed document %s present %d times, want 1", seedID(i), seen[seedID(i)])
		}
	}
	type tally struct{ acked, unknown int64 }
	incs := map[string]*tally{}
	var inserts [3]int
	ackedOn := map[string]int{}
	var unknownStored int
	written := map[string]bool{}
	for _, o := range ops {
		if o.update {
			if incs[o.id] == nil {
				incs[o.id] = &tally{}
			}
			switch o.outcome {
			case outcomeAcked:
				incs[o.id].acked++
			case outcomeUnknown:
				incs[o.id].unknown++
			}
			continue
		}
		inserts[o.outcome]++
		if o.outcome == outcomeAcked {
			ackedOn[o.shard]++
		}
		written[o.id] = true
		switch {
		case o.outcome == outcomeAcked && seen[o.id] != 1:
			t.Errorf("acknowledged insert %s (client %d, %s .. %s, on %s after %d stale answers) present %d times", o.id, o.client, o.call.Format("15:04:05.000"), o.ret.Format("15:04:05.000"), o.shard, o.stale, seen[o.id])
		case o.outcome == outcomeRefused && seen[o.id] != 0:
			t.Errorf("refused insert %s (%s) present %d times", o.id, o.err, seen[o.id])
		case o.outcome == outcomeUnknown && seen[o.id] > 0:
			unknownStored++
		}
	}
	for id := range seen {
		if !strings.HasPrefix(id, "s-") && !written[id] {
			t.Errorf("document %s present, never written", id)
		}
	}
	var incAcked, incUnknown int64
	for _, id := range slices.Sorted(maps.Keys(incs)) {
		tl := incs[id]
		incAcked, incUnknown = incAcked+tl.acked, incUnknown+tl.unknown
		if n := counters[id]; n < tl.acked || n > tl.acked+tl.unknown {
			t.Errorf("counter %s = %d, want %d acknowledged increments plus at most %d unknown", id, n, tl.acked, tl.unknown)
		}
	}
	t.Logf("documents owned %d (orphans left %d); inserts %d acknowledged (by shard %v), %d refused, %d unknown (%d of them stored); increments %d acknowledged, %d unknown over %d counters",
		len(seen), orphans, inserts[outcomeAcked], ackedOn, inserts[outcomeRefused], inserts[outcomeUnknown], unknownStored, incAcked, incUnknown, len(incs))
}
