package readrouting

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

// The live tests of this package (here and in lag_live_test.go) share one real mongod 6.0.5
// replica set of three members, started on first use with the project's launcher on
// launcher.RoutingTestPort and killed when the test binary ends. They run in plain `go test`
// (make test); a set that cannot start fails them, nothing is skipped or faked.
var live struct {
	once sync.Once
	set  *launcher.Set
	stop func()
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if live.stop != nil {
		live.stop()
	}
	os.Exit(code)
}

// LiveSet returns the shared 3-member set, healthy (one PRIMARY, two SECONDARY). Exported for
// the external test package (this is a _test.go file: it is not part of the package's API).
func LiveSet(t testing.TB) *launcher.Set {
	t.Helper()
	live.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		live.set, live.stop, live.err = launcher.StartShared(ctx, launcher.Options{Members: 3, BasePort: launcher.RoutingTestPort,
			// configureFailPoint (stopReplProducer) makes a secondary lag while it stays reachable.
			ExtraArgs: []string{"--setParameter", "enableTestCommands=1"}})
		if live.err != nil {
			live.err = fmt.Errorf("start a 3-member replica set on port %d with the launcher: %w", launcher.RoutingTestPort, live.err)
		}
	})
	if live.err != nil {
		t.Fatal(live.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := live.set.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	// SECONDARY is not yet replicating: a new set's secondaries pick a sync source a second or
	// more after the election. A write acknowledged by every member means they all sync.
	c, err := mongo.Connect(options.Client().ApplyURI(live.set.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Disconnect(context.Background()) }()
	wAll := &writeconcern.WriteConcern{W: len(live.set.Members())}
	_, err = c.Database(HeartbeatDatabase).Collection("ready", options.Collection().SetWriteConcern(wAll)).
		UpdateOne(ctx, bson.D{{Key: "_id", Value: "ready"}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: 1}}}},
			options.UpdateOne().SetUpsert(true))
	if err != nil {
		t.Fatalf("write acknowledged by all %d members: %v", len(live.set.Members()), err)
	}
	// The status has each member's optime from its heartbeat replies (every 2 s): until each
	// has reported one of the primary's term (a new set, or after a failover), none is vouched
	// for (OldTerm).
	src := DriverSource{Client: c}
	if err := eventually.Until(ctx, func() error {
		st, err := src.ReplSetStatus(ctx)
		if err != nil {
			return err
		}
		for _, m := range LagFromStatus(st) {
			if m.OldTerm {
				return fmt.Errorf("%s has not reported an optime of term %d yet", m.Host, st.Term)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("every member on the primary's term: %v", err)
	}
	return live.set
}

// On the real server (6.0.5): every member in replSetGetStatus carries lastAppliedWallTime and
// the monitor's heartbeat document keeps an idle set's caught-up secondaries within about one
// heartbeat interval (500 ms) of the primary's clock, where the primary's no-op writer alone
// (every 10 s) would let them read up to 10 s behind.
func TestLiveIdleSetLagStaysWithinHeartbeatInterval(t *testing.T) {
	set := LiveSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI(set.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Disconnect(context.Background()) }()
	src := DriverSource{Client: c}
	st, err := src.ReplSetStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Set != set.Name() || st.Date.IsZero() || st.HeartbeatIntervalMillis != 2000 || len(st.Members) != 3 {
		t.Fatalf("status: set %q date %s heartbeatIntervalMillis %d, %d members", st.Set, st.Date, st.HeartbeatIntervalMillis, len(st.Members))
	}
	for _, m := range st.Members {
		if m.LastAppliedWallTime.IsZero() || (!m.Self && m.LastHeartbeatRecv.IsZero()) {
			t.Errorf("%s (%s): lastAppliedWallTime %s lastHeartbeatRecv %s, want both", m.Name, m.StateStr, m.LastAppliedWallTime, m.LastHeartbeatRecv)
		}
	}

	m := NewMonitor(map[string]StatusSource{set.Name(): src}, 250*time.Millisecond)
	runCtx, stop := context.WithCancel(ctx)
	// The wall times in the status are milliseconds: truncate so a write right after the start
	// counts as after it.
	started := time.Now().Truncate(time.Millisecond)
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(runCtx) }()
	defer func() { stop(); <-done }()

	// Wait until every member has applied a write made since the monitor started (its first
	// heartbeat) and the monitor has measured after that, then sample for 3 s: before, an idle
	// set's lag is whatever the last write before the test left.
	eventually.NoError(t, 30*time.Second, func() error {
		st, err := src.ReplSetStatus(ctx)
		if err != nil {
			return err
		}
		for _, ms := range st.Members {
			if ms.LastAppliedWallTime.Before(started) {
				return fmt.Errorf("%s last applied %s, before the monitor started at %s", ms.Name, ms.LastAppliedWallTime, started)
			}
		}
		return nil
	})
	landed := time.Now()
	eventually.True(t, 10*time.Second, "a lag snapshot measured after the first heartbeat landed", func() bool {
		return m.Snapshot().MeasuredAt.After(landed)
	})
	var worst time.Duration
	samples := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		snap := m.Snapshot()
		for _, ml := range snap.Members {
			if ml.State != StateSecondary {
				continue
			}
			samples++
			if !ml.Known || ml.Unreachable {
				t.Errorf("%s: %+v, want known and reachable", ml.Host, ml)
			}
			worst = max(worst, ml.Lag)
		}
	}
	t.Logf("idle set, heartbeat every %s: worst secondary lag over %d samples %s", DefaultHeartbeatInterval, samples, worst)
	if samples == 0 || worst > 800*time.Millisecond {
		t.Errorf("worst idle lag %s over %d samples, want at most one heartbeat interval plus slack (800 ms)", worst, samples)
	}
	if d := NewPolicy().Decide(OpProductPage, m.Snapshot(), time.Now()); d.Target != Secondary {
		t.Errorf("idle healthy set: product page %s (%s), want secondary", d.Target, d.Reason)
	}
}

// TestLiveMonitor measures real lag through every shard's replica set of a sharded cluster,
// discovering the shards from config.shards: through a mongos at SHARDMART_MONGO_URI (shard
// logins from SHARDMART_MONGO_MONITOR_USER/PASSWORD when the mongos users do not exist on the
// shards), else on a router-less cluster the test starts (config server and two 3-member
// shards, real mongod 6.0.5), whose config server holds the same config.shards.
func TestLiveMonitor(t *testing.T) {
	uri := os.Getenv("SHARDMART_MONGO_URI")
	wantShards := 0
	if uri == "" {
		c := launcher.ClusterForTest(t, launcher.ClusterOptions{Shards: 2, MembersPerShard: 3, BasePort: launcher.RoutingClusterTestPort})
		uri, wantShards = c.ConfigURI(), 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mongos, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mongos.Disconnect(context.Background()) }()
	cred := Credentials{User: os.Getenv("SHARDMART_MONGO_MONITOR_USER"), Password: os.Getenv("SHARDMART_MONGO_MONITOR_PASSWORD")}
	uris, err := MonitorShardURIs(ctx, mongos, uri, cred)
	if err != nil || len(uris) == 0 || wantShards > 0 && len(uris) != wantShards {
		t.Fatalf("shard URIs: %v (%d shards, want %d)", err, len(uris), wantShards)
	}
	sources := map[string]StatusSource{}
	for shard, u := range uris {
		c, err := mongo.Connect(options.Client().ApplyURI(u))
		if err != nil {
			t.Fatalf("connect %s: %v", shard, err)
		}
		defer func() { _ = c.Disconnect(context.Background()) }()
		sources[shard] = DriverSource{Client: c}
	}
	// A shard's status has each member's optime from its heartbeat replies (every 2 s): until
	// each has reported one of its primary's term (the shards start just before), none is
	// vouched for (OldTerm). Healthy means past that.
	mon := NewMonitor(sources, time.Second)
	var snap LagSnapshot
	if err := eventually.Until(ctx, func() error {
		snap = mon.Measure(ctx)
		if len(snap.Errors) > 0 {
			return fmt.Errorf("shard status errors: %v", snap.Errors)
		}
		for _, m := range snap.Members {
			if m.OldTerm {
				return fmt.Errorf("%s %s has not reported an optime of its primary's term yet", m.Shard, m.Host)
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("every member on its primary's term: %v", err)
	}
	perShard := map[string]int{}
	for _, m := range snap.Members {
		t.Logf("%s %s %s lag=%s known=%t unreachable=%t", m.Shard, m.Host, m.State, m.Lag, m.Known, m.Unreachable)
		if m.State == "SECONDARY" {
			perShard[m.Shard]++
			if !m.Known || m.Unreachable {
				t.Errorf("%s %s: lag unknown or unreachable on a healthy cluster", m.Shard, m.Host)
			}
		}
	}
	if wantShards > 0 {
		for shard := range uris {
			if perShard[shard] != 2 {
				t.Errorf("shard %s: %d secondaries measured, want 2", shard, perShard[shard])
			}
		}
	}
	d := NewPolicy().Decide(OpOrderHistory, snap, time.Now())
	t.Logf("order history read goes to %s: %s", d.Target, d.Reason)
}
