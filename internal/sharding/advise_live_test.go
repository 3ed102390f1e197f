package sharding_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/advise"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/mongodb/shardtest"
	"github.com/shardmart/shardmart/internal/sharding"
)

// agreeWorkload is the shape both sides run: 3 shards, 1 MiB chunks, 3,000 inserts of ~1 KB
// documents with ObjectId _ids, under the three candidates compared.
const agreeWorkload = `
name: real-vs-advise
shards: 3
chunk_size: 1MiB
ops: 3000
days: 1
ticks_per_day: 24
collections:
  - name: events
    doc_bytes: 1000
    fields:
      _id: objectid
    operations:
      - {name: insert, type: insert, weight: 100}
    candidates:
      - {_id: 1}
      - {_id: hashed}
      - key: {_id: hashed}
        zones:
          - name: tier
            shards: [1, 2]
            ranges: [{min: {_id: MinKey}, max: {_id: MaxKey}}]
`

const agreeInserts = 3000

// simulated runs the advisor on agreeWorkload and returns, per candidate, the insert share
// per shard: before the first chunk move for the ascending key (what the real run measures
// with the balancer stopped), over the whole run for the others.
func simulated(t *testing.T) [3][]float64 {
	t.Helper()
	w, err := advise.ParseWorkload([]byte(agreeWorkload), "real-vs-advise.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := w.Collections[0]
	var out [3][]float64
	for i, cand := range c.Candidates {
		r, err := advise.SimulateCandidate(context.Background(), w, c, cand)
		if err != nil {
			t.Fatal(err)
		}
		counts := r.InsertsBeforeMove
		if i > 0 {
			counts = make([]int64, r.Shards)
			for _, tick := range r.Writes {
				for sh, n := range tick {
					counts[sh] += n
				}
			}
		}
		out[i] = shareOf(counts)
	}
	return out
}

func shareOf(counts []int64) []float64 {
	var tot int64
	for _, n := range counts {
		tot += n
	}
	out := make([]float64, len(counts))
	for i, n := range counts {
		out[i] = float64(n) / float64(max(tot, 1))
	}
	return out
}

// realShares turns Place's per-shard counts into shares in shard order sh0, sh1, sh2.
func realShares(r *shardtest.Router, got map[string]int) []float64 {
	counts := make([]int64, 0, len(r.ShardIDs()))
	for _, sh := range r.ShardIDs() {
		counts = append(counts, int64(got[sh]))
	}
	return shareOf(counts)
}

func objectIDDocs(n int, from time.Time) []bson.D {
	return docs(n, 1000, func(i int) bson.D {
		return bson.D{{Key: "_id", Value: bson.NewObjectIDFromTimestamp(from.Add(time.Duration(i) * time.Millisecond))}}
	})
}

// SHD-2: the advisor and the real cluster agree on where inserts go, for the same workload
// shape. Ascending {_id: 1}: the shard holding the max chunk takes ≥ 90 % of the inserts
// before the balancer acts. {_id: hashed}: every shard within its fair share ± 10 points.
// {_id: hashed} zoned to shards 1-2: shard 0 gets nothing, the zone's two shards share the rest
// within ± 10 points. The shares are printed for docs/advise.md.
func TestAdvisorAgreesWithTheRealCluster(t *testing.T) {
	r := cluster(t)
	ctx := eventually.Context(t, settleTimeout+2*time.Minute)
	sim := simulated(t)
	var real [3][]float64

	// Ascending: older data spread by the balancer first, so the max chunk is one chunk among
	// several; then new ObjectIds with the balancer stopped.
	ns := liveDB(t) + "_asc.events"
	shardColl(ctx, t, r, ns, bson.D{{Key: "_id", Value: int32(1)}})
	balancerOff(ctx, t, r)
	place(ctx, t, r, ns, objectIDDocs(2*agreeInserts, time.Now().Add(-time.Hour))) // 6 MB: past the balancer's 3-chunk threshold
	balancerOn(ctx, t, r)
	settle(ctx, t, r, ns)
	balancerOff(ctx, t, r)
	info, err := r.Collection(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Owners()) < 2 {
		t.Fatalf("the older data stayed on %v: want chunks on several shards before the ascending inserts", info.Owners())
	}
	topOwner := info.Chunks[len(info.Chunks)-1].Shard
	got := place(ctx, t, r, ns, objectIDDocs(agreeInserts, time.Now()))
	real[0] = realShares(r, got)
	if got[topOwner] != agreeInserts {
		t.Errorf("ascending inserts went to %v, want all on the max chunk's shard %s", got, topOwner)
	}

	// Hashed: an empty collection is presplit across the shards.
	ns = liveDB(t) + "_hashed.events"
	shardColl(ctx, t, r, ns, bson.D{{Key: "_id", Value: "hashed"}})
	real[1] = realShares(r, place(ctx, t, r, ns, objectIDDocs(agreeInserts, time.Now())))

	// Hashed and zoned to the second and third shard, presplit inside the zone.
	db := liveDB(t) + "_zoned"
	ns = db + ".events"
	zone := "tier_" + db
	ids := r.ShardIDs()
	var out strings.Builder
	if err := sharding.RunLogged(ctx, r, &out, sharding.EnableShardingCmd(db),
		sharding.AddShardToZoneCmd(ids[1], zone), sharding.AddShardToZoneCmd(ids[2], zone),
		sharding.UpdateZoneKeyRangeCmd(ns, sharding.Range{
			Min: bson.D{{Key: "_id", Value: bson.MinKey{}}}, Max: bson.D{{Key: "_id", Value: bson.MaxKey{}}}, Zone: zone})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, sh := range ids[1:] {
			_, _ = r.RunCommand(context.Background(), "admin", sharding.RemoveShardFromZoneCmd(sh, zone))
		}
	})
	if _, err := r.RunCommand(ctx, "admin", bson.D{{Key: "shardCollection", Value: ns},
		{Key: "key", Value: bson.D{{Key: "_id", Value: "hashed"}}}, {Key: "presplitHashedZones", Value: true}}); err != nil {
		t.Fatal(err)
	}
	real[2] = realShares(r, place(ctx, t, r, ns, objectIDDocs(agreeInserts, time.Now())))

	names := []string{"{_id: 1}, before the balancer acts", "{_id: hashed}", "{_id: hashed}, zone on shards 1-2"}
	for i := range names {
		t.Logf("| %s | advise %s | real %s |", names[i], pct(sim[i]), pct(real[i]))
	}
	for side, s := range map[string][3][]float64{"advise": sim, "real cluster": real} {
		if top := slicesMax(s[0]); top < 0.9 {
			t.Errorf("%s, ascending key: busiest shard took %.0f%% of inserts, want ≥ 90%%", side, 100*top)
		}
		for sh, x := range s[1] {
			if math.Abs(x-1.0/3) > 0.10 {
				t.Errorf("%s, hashed key: shard %d took %.0f%%, want 33%% ± 10", side, sh, 100*x)
			}
		}
		if s[2][0] != 0 || math.Abs(s[2][1]-0.5) > 0.10 || math.Abs(s[2][2]-0.5) > 0.10 {
			t.Errorf("%s, zoned hashed key: shares %s, want 0%% on shard 0 and 50%% ± 10 on shards 1-2", side, pct(s[2]))
		}
	}
}

func slicesMax(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func pct(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.1f%%", 100*x)
	}
	return strings.Join(parts, " / ")
}
