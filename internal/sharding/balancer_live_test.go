package sharding_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/mongodb/shardtest"
	"github.com/shardmart/shardmart/internal/sharding"
)

// SHD-3: 15 MB inserted onto one shard is spread by the real balancer. Since 6.0.3 it balances
// data size, not chunk counts: a collection counts as balanced once its shards differ by less
// than three times the range (chunk) size, so that is the bound asserted.
func TestBalancerEvensDataInsertedOntoOneShard(t *testing.T) {
	r := cluster(t)
	ctx := eventually.Context(t, settleTimeout+time.Minute)
	ns := liveDB(t) + ".items"
	shardColl(ctx, t, r, ns, bson.D{{Key: "k", Value: int32(1)}})
	balancerOff(ctx, t, r) // every document lands where the collection starts: one chunk, one shard
	const n, size = 15_000, 1000
	got := place(ctx, t, r, ns, docs(n, size, func(i int) bson.D { return bson.D{{Key: "k", Value: int64(i)}} }))
	if len(got) != 1 {
		t.Fatalf("before balancing the documents went to %v, want one shard", got)
	}
	before, err := r.Stats(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before: %s", sizes(before))

	balancerOn(ctx, t, r)
	after := settle(ctx, t, r, ns)
	t.Logf("after:  %s", sizes(after))
	var owned int64
	var lo, hi int64 = 1 << 62, 0
	for _, sh := range r.ShardIDs() {
		s := after[sh]
		owned += s.Owned()
		lo, hi = min(lo, s.Size), max(hi, s.Size)
	}
	if owned != n {
		t.Errorf("%d documents owned after balancing, inserted %d", owned, n)
	}
	if lo == 0 || hi-lo >= 3*chunkBytes {
		t.Errorf("data sizes %s: want every shard holding data and max-min < 3 chunk sizes (%d B)", sizes(after), 3*chunkBytes)
	}
	info, err := r.Collection(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chunks per shard after: %v", info.ChunksOn())
}

func sizes(st map[string]shardtest.ShardStats) string {
	var b strings.Builder
	for _, sh := range slices.Sorted(maps.Keys(st)) {
		fmt.Fprintf(&b, "%s=%.1fMB/%d docs ", sh, float64(st[sh].Size)/(1<<20), st[sh].Owned())
	}
	return b.String()
}

// SHD-3: an empty collection sharded on a hashed key is presplit across every shard.
func TestEmptyHashedCollectionIsPresplit(t *testing.T) {
	r := cluster(t)
	ctx := eventually.Context(t, time.Minute)
	ns := liveDB(t) + ".carts"
	shardColl(ctx, t, r, ns, bson.D{{Key: "_id", Value: "hashed"}})
	info, err := r.Collection(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	on := info.ChunksOn()
	for _, sh := range r.ShardIDs() {
		if on[sh] == 0 {
			t.Errorf("shard %s got no chunk of the presplit collection: %v", sh, on)
		}
	}
	t.Logf("presplit chunks per shard: %v", on)
}

// SHD-5: a manual move is refused while the balancer runs, and done after `balancer stop
// --wait`; the documents then live on the target shard.
func TestManualMoveRefusedWhileBalancerRunsDoneAfterStop(t *testing.T) {
	r := cluster(t)
	ctx := eventually.Context(t, 2*time.Minute)
	db := liveDB(t)
	ns := db + ".items"
	shardColl(ctx, t, r, ns, bson.D{{Key: "k", Value: int32(1)}})
	from := primaryShard(ctx, t, r, db)
	to := otherShard(r, from)
	balancerOff(ctx, t, r)
	place(ctx, t, r, ns, docs(400, 200, func(i int) bson.D { return bson.D{{Key: "k", Value: int64(i)}} }))
	balancerOn(ctx, t, r)

	coll := sharding.Collection{Name: "items", Key: sharding.Key{{Name: "k"}}}
	req := sharding.MoveRangeRequest{NS: ns, Collection: coll, ToShard: to,
		Min: bson.D{{Key: "k", Value: int64(100)}}, Max: bson.D{{Key: "k", Value: int64(200)}}}
	var out strings.Builder
	if err := sharding.MoveRange(ctx, r, req, &out); !errors.Is(err, sharding.ErrBalancerRunning) {
		t.Fatalf("move with the balancer on: %v, want ErrBalancerRunning", err)
	}
	if n := countOn(ctx, t, r, to, ns, nil); n != 0 {
		t.Fatalf("refused move left %d documents on %s", n, to)
	}

	if _, err := sharding.StopBalancer(ctx, r, time.Minute, settlePoll, &out); err != nil {
		t.Fatal(err)
	}
	if err := sharding.MoveRange(ctx, r, req, &out); err != nil {
		t.Fatalf("move with the balancer stopped: %v\n%s", err, out.String())
	}
	info, err := r.Collection(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int64{100, 150, 199} {
		if owner, _ := info.Owner(bson.D{{Key: "k", Value: k}}); owner != to {
			t.Errorf("k=%d owned by %s after the move, want %s", k, owner, to)
		}
	}
	for _, k := range []int64{99, 200} {
		if owner, _ := info.Owner(bson.D{{Key: "k", Value: k}}); owner != from {
			t.Errorf("k=%d owned by %s, want it left on %s", k, owner, from)
		}
	}
	waitNoOrphans(ctx, t, r, ns)
	inRange := bson.D{{Key: "k", Value: bson.D{{Key: "$gte", Value: 100}, {Key: "$lt", Value: 200}}}}
	if n := countOn(ctx, t, r, to, ns, inRange); n != 100 {
		t.Errorf("%s holds %d documents of the moved range, want 100", to, n)
	}
	if n := countOn(ctx, t, r, from, ns, inRange); n != 0 {
		t.Errorf("%s still holds %d documents of the moved range", from, n)
	}
	t.Logf("%s", out.String())
}

// SHD-5, SHD-6: a chunk of one shard-key value larger than the chunk size cannot be split;
// moving it is refused unless forceJumbo is given.
func TestJumboRangeRefusedWithoutForceJumbo(t *testing.T) {
	r := cluster(t)
	ctx := eventually.Context(t, 2*time.Minute)
	db := liveDB(t)
	ns := db + ".products"
	shardColl(ctx, t, r, ns, bson.D{{Key: "category", Value: int32(1)}})
	from := primaryShard(ctx, t, r, db)
	to := otherShard(r, from)
	balancerOff(ctx, t, r)
	place(ctx, t, r, ns, docs(3000, 1000, func(int) bson.D { return bson.D{{Key: "category", Value: "bulk"}} }))

	coll := sharding.Collection{Name: "products", Key: sharding.Key{{Name: "category"}}}
	req := sharding.MoveRangeRequest{NS: ns, Collection: coll, ToShard: to,
		Min: bson.D{{Key: "category", Value: bson.MinKey{}}}, Max: bson.D{{Key: "category", Value: bson.MaxKey{}}}}
	var out strings.Builder
	err := sharding.MoveRange(ctx, r, req, &out)
	if err == nil {
		t.Fatalf("moving a 3 MB single-value chunk (chunk size 1 MB) without forceJumbo succeeded\n%s", out.String())
	}
	if ce := (mongo.CommandError{}); !errors.As(err, &ce) || ce.Name != "ChunkTooBig" {
		t.Fatalf("refusal %v, want the server's ChunkTooBig", err)
	}
	t.Logf("refused: %v", err)
	if n := countOn(ctx, t, r, to, ns, nil); n != 0 {
		t.Fatalf("refused move left %d documents on %s", n, to)
	}
	req.Options.ForceJumbo = true
	if err := sharding.MoveRange(ctx, r, req, &out); err != nil {
		t.Fatalf("move with forceJumbo: %v\n%s", err, out.String())
	}
	waitNoOrphans(ctx, t, r, ns)
	if n := countOn(ctx, t, r, to, ns, nil); n != 3000 {
		t.Errorf("%s holds %d documents after the forced move, want 3000", to, n)
	}
}

// SHD-3: balancerStatus and the auto-split verdict come from the real config server: a 6.0.5
// server never auto-splits, and stop/start flip the mode.
func TestBalancerStatusAndAutoSplitFromTheServer(t *testing.T) {
	r := cluster(t)
	ctx := eventually.Context(t, time.Minute)
	as, err := sharding.GetAutoSplit(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if as.Version != "6.0.5" || !as.NoOp {
		t.Errorf("auto-split on %s: noOp=%t, want 6.0.5 and a no-op", as.Version, as.NoOp)
	}
	balancerOff(ctx, t, r)
	if st, err := sharding.GetBalancerStatus(ctx, r); err != nil || st.Enabled() {
		t.Errorf("after stop: %s, %v", st, err)
	}
	balancerOn(ctx, t, r)
	if st, err := sharding.GetBalancerStatus(ctx, r); err != nil || !st.Enabled() || st.Mode != "full" {
		t.Errorf("after start: %s, %v", st, err)
	}
}
