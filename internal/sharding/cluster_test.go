package sharding_test

// The live sharding tests: a real config server and three real shards (mongod 6.0.5, one
// member each, chunk size 1 MB), started once for this test binary on first use. There is no
// mongos: shardtest.Router sends the internal form of each public command and places each
// document on the shard that owns its chunk (see ../mongodb/shardtest).

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/mongodb/shardtest"
)

const (
	liveShards  = 3
	chunkSizeMB = 1
	chunkBytes  = chunkSizeMB << 20
	// settleTimeout bounds every wait on the real balancer (6.0 runs a round every ~10 s when
	// idle and moves ~1 MB per 1-2 s).
	settleTimeout = 3 * time.Minute
	settlePoll    = 250 * time.Millisecond
)

var live = shardtest.Shared{Opts: launcher.ClusterOptions{Shards: liveShards, BasePort: launcher.ShardingTestPort, ChunkSizeMB: chunkSizeMB}}

func TestMain(m *testing.M) {
	code := m.Run()
	live.Stop()
	os.Exit(code)
}

// cluster returns the shared router, starting the cluster on first use.
func cluster(t *testing.T) *shardtest.Router {
	_, r := live.Get(t)
	return r
}

var dbSeq atomic.Int64

// liveDB names a database of its own for one test.
func liveDB(t *testing.T) string {
	name := strings.NewReplacer("/", "_", "-", "_").Replace(t.Name())
	return fmt.Sprintf("t%d_%s", dbSeq.Add(1), name[:min(len(name), 40)])
}

// balancerOn, balancerOff and shardColl are shardtest's, failing the test on error.
func balancerOn(ctx context.Context, t *testing.T, r *shardtest.Router) {
	shardtest.BalancerOn(ctx, t, r)
}
func balancerOff(ctx context.Context, t *testing.T, r *shardtest.Router) {
	shardtest.BalancerOff(ctx, t, r)
}
func shardColl(ctx context.Context, t *testing.T, r *shardtest.Router, ns string, key bson.D) {
	t.Helper()
	if err := r.ShardCollection(ctx, ns, key); err != nil {
		t.Fatal(err)
	}
}

// docs makes n documents of about size bytes each; key fills in the shard-key fields of i.
func docs(n, size int, key func(i int) bson.D) []bson.D {
	pad := strings.Repeat("x", size)
	out := make([]bson.D, n)
	for i := range out {
		out[i] = append(key(i), bson.E{Key: "pad", Value: pad})
	}
	return out
}

// place inserts through the router in batches, returning the documents per shard.
func place(ctx context.Context, t *testing.T, r *shardtest.Router, ns string, ds []bson.D) map[string]int {
	t.Helper()
	total := map[string]int{}
	for lo := 0; lo < len(ds); lo += 2000 {
		got, err := r.Place(ctx, ns, ds[lo:min(lo+2000, len(ds))])
		if err != nil {
			t.Fatal(err)
		}
		for sh, n := range got {
			total[sh] += n
		}
	}
	return total
}

// settle waits until the real balancer calls ns compliant and orphans are gone.
func settle(ctx context.Context, t *testing.T, r *shardtest.Router, ns string) map[string]shardtest.ShardStats {
	t.Helper()
	start := time.Now()
	c, st, err := r.WaitSettled(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s settled in %s (compliant=%t)", ns, time.Since(start).Round(100*time.Millisecond), c.Compliant)
	return st
}

// waitNoOrphans waits until no shard holds orphaned documents of ns (the donor deletes a moved
// range right away: the cluster runs with orphanCleanupDelaySecs=0).
func waitNoOrphans(ctx context.Context, t *testing.T, r *shardtest.Router, ns string) map[string]shardtest.ShardStats {
	t.Helper()
	st, err := r.WaitNoOrphans(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// countOn counts ns's documents matching filter on one shard, read on that shard.
func countOn(ctx context.Context, t *testing.T, r *shardtest.Router, shard, ns string, filter bson.D) int64 {
	t.Helper()
	db, coll, _ := strings.Cut(ns, ".")
	if filter == nil {
		filter = bson.D{}
	}
	n, err := r.Shards[shard].Database(db).Collection(coll).CountDocuments(ctx, filter)
	if err != nil {
		t.Fatalf("count %s on %s: %v", ns, shard, err)
	}
	return n
}

// primaryShard is the database's primary shard (where an unsharded or new collection lives).
func primaryShard(ctx context.Context, t *testing.T, r *shardtest.Router, db string) string {
	t.Helper()
	docs, err := r.Find(ctx, "config", "databases", bson.D{{Key: "_id", Value: db}})
	if err != nil || len(docs) != 1 {
		t.Fatalf("config.databases %s: %d documents, %v", db, len(docs), err)
	}
	return docs[0].Lookup("primary").StringValue()
}

// otherShard is a shard that is not sh.
func otherShard(r *shardtest.Router, sh string) string {
	for _, id := range r.ShardIDs() {
		if id != sh {
			return id
		}
	}
	return ""
}
