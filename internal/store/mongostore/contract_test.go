package mongostore

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/sharding"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

// The live tests run against a real mongod 6.0.5 replica set (one member) that TestMain starts
// with the project's launcher on launcher.ContractTestPort; SHARDMART_MONGO_URI points them at a
// running server instead (a mongos or a replica set). If the set cannot start, every live test
// fails with the reason: nothing is skipped or faked.
var (
	testURI      string
	testSetupErr error
)

func TestMain(m *testing.M) {
	code := func() int {
		if testURI = os.Getenv("SHARDMART_MONGO_URI"); testURI != "" {
			return m.Run()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		set, stop, err := launcher.StartShared(ctx, launcher.Options{Members: 1, BasePort: launcher.ContractTestPort})
		if err != nil {
			testSetupErr = fmt.Errorf("start a one-member replica set on port %d with the launcher: %w", launcher.ContractTestPort, err)
			return m.Run()
		}
		defer stop()
		testURI = set.URI()
		return m.Run()
	}()
	os.Exit(code)
}

// TestContract runs THE contract suite against a live MongoDB: every family, on a fresh
// database, dropped afterwards.
func TestContract(t *testing.T) {
	s, _ := liveStore(t)
	// Runs after every (parallel) subtest, before the database is dropped.
	t.Cleanup(func() { checkEveryIndexIsUsed(t, s) })
	storetest.Run(t, contractBackend(s, func(t *testing.T) *Store {
		fresh, _ := liveStore(t)
		return fresh
	}))
}

// contractBackend is the contract suite's view of s; the outbox cases each want a fresh
// database, which fresh opens.
func contractBackend(s *Store, fresh func(*testing.T) *Store) storetest.Backend {
	return storetest.WholeStore(s, fresh, "on MongoDB the catalog family is the products collection itself, not a projector-fed model")
}

// liveStore opens a fresh database on the test server, shards its collections when the server
// is a mongos, and drops it when the test ends.
func liveStore(t testing.TB) (*Store, bool) {
	t.Helper()
	return liveStoreWith(t, Options{})
}

// liveStoreWith is liveStore with options (URI and Database are set here).
func liveStoreWith(t testing.TB, o Options) (*Store, bool) {
	t.Helper()
	if testSetupErr != nil {
		t.Fatal(testSetupErr)
	}
	uri := testURI
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbName := fmt.Sprintf("shardmart_test_%d", time.Now().UnixNano())
	o.URI, o.Database = uri, dbName
	s, err := Open(ctx, o)
	if err != nil {
		t.Fatalf("open %s: %v", redact(uri), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.db.Drop(ctx); err != nil {
			t.Errorf("drop test database %s: %v", dbName, err)
		}
		_ = s.Close()
	})
	var hello struct {
		Msg string `bson:"msg"`
	}
	if err := s.client.Database("admin").RunCommand(ctx, d(e("hello", 1))).Decode(&hello); err != nil {
		t.Fatalf("hello: %v", err)
	}
	if hello.Msg != "isdbgrid" {
		return s, false
	}
	shardTestDatabase(ctx, t, s, dbName)
	t.Logf("database %s on a mongos: collections sharded on ShardKeys", dbName)
	return s, true
}

// TestTargetingExplain asks mongos (explain, queryPlanner) how it routes the repositories'
// filters on the hashed collections, whose fresh chunks spread over the shards: a filter with the
// shard key must go to one shard (SINGLE_SHARD), the same filter without it to all (SHARD_MERGE).
// Ranged keys (products, events) start as one chunk on one shard, so they are not judged here.
func TestTargetingExplain(t *testing.T) {
	s, sharded := liveStore(t)
	if !sharded {
		t.Skip("needs a mongos: shard targeting is mongos's routing decision (explain SINGLE_SHARD vs SHARD_MERGE); none can be had here (set SHARDMART_MONGO_URI to a mongos to run it)")
	}
	ctx := context.Background()
	user := cart.User("alice")
	cases := []struct {
		coll             string
		targeted, spread bson.D
	}{
		{collOrders, orderKey("alice", "o1"), d(e("_id", "o1"))},
		{collCarts, liveCartFilter(user, time.Now()), d(e("user_id", "alice"), e("status", "active"))},
		{collSessions, liveSessionFilter("s1", time.Now()), d(e("user_id", "alice"))},
		{collHistory, historyFilter("alice", nil), d(e("_id", "o1"))},
		{collClaims, d(e("_id", keyClaimID("alice", "k"))), d(e("order_id", "o1"))},
		{collUsers, d(e("_id", "a@example.com")), d(e("user_id", "u1"))},
	}
	for _, c := range cases {
		if got := explainStage(ctx, t, s, c.coll, c.spread); got != "SHARD_MERGE" {
			t.Logf("%s: a filter without the shard key is %s: the fresh chunks sit on one shard, targeting cannot be told apart", c.coll, got)
			continue
		}
		if got := explainStage(ctx, t, s, c.coll, c.targeted); got != "SINGLE_SHARD" {
			t.Errorf("%s %v: mongos plans %s, want SINGLE_SHARD", c.coll, c.targeted, got)
		}
	}
}

func explainStage(ctx context.Context, t *testing.T, s *Store, coll string, filter bson.D) string {
	t.Helper()
	var out struct {
		QueryPlanner struct {
			WinningPlan struct {
				Stage string `bson:"stage"`
			} `bson:"winningPlan"`
		} `bson:"queryPlanner"`
	}
	cmd := d(e("explain", d(e("find", coll), e("filter", filter))), e("verbosity", "queryPlanner"))
	if err := s.db.RunCommand(ctx, cmd).Decode(&out); err != nil {
		t.Fatalf("explain %s: %v", coll, err)
	}
	return out.QueryPlanner.WinningPlan.Stage
}

// shardTestDatabase shards the test database's collections the way production is sharded,
// with the sharding package's command builders (no zones: they name the cluster's shards).
func shardTestDatabase(ctx context.Context, t testing.TB, s *Store, db string) {
	t.Helper()
	admin := sharding.DriverAdmin{Client: s.client}
	if _, err := admin.RunCommand(ctx, "admin", sharding.EnableShardingCmd(db)); err != nil {
		t.Fatalf("enable sharding: %v", err)
	}
	for coll, key := range ShardKeys {
		cmd := d(e("shardCollection", db+"."+coll), e("key", key))
		if _, err := admin.RunCommand(ctx, "admin", cmd); err != nil {
			t.Fatalf("shard %s on %v: %v", coll, key, err)
		}
	}
}
