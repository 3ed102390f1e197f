package sharding

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// liveAdmin connects to the mongos named by SHARDMART_MONGO_URI, or skips.
func liveAdmin(t *testing.T) (context.Context, DriverAdmin) {
	t.Helper()
	uri := os.Getenv("SHARDMART_MONGO_URI")
	if uri == "" {
		t.Skip("needs a mongos: these run the public sharding commands through a router, and none can be had here (set SHARDMART_MONGO_URI to a mongos, e.g. deploy/mongodb)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatalf("connect %s: %v", uri, err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	return ctx, DriverAdmin{Client: client}
}

// liveSpec uses a throwaway database and the cluster's real shard names.
func liveSpec(ctx context.Context, t *testing.T, a DriverAdmin) Spec {
	t.Helper()
	raw, err := a.RunCommand(ctx, "admin", bson.D{{Key: "listShards", Value: 1}})
	if err != nil {
		t.Fatalf("listShards (is the URI a mongos?): %v", err)
	}
	var ls struct {
		Shards []struct {
			ID string `bson:"_id"`
		} `bson:"shards"`
	}
	if err := bson.Unmarshal(raw, &ls); err != nil || len(ls.Shards) == 0 {
		t.Fatalf("listShards: %v, %d shards", err, len(ls.Shards))
	}
	first, last := ls.Shards[0].ID, ls.Shards[len(ls.Shards)-1].ID
	spec, err := NewSpec(Options{
		Database: fmt.Sprintf("shardmart_live_%d", time.Now().UnixNano()),
		Tiers:    map[string][]string{"fast": {first}, "standard": {last}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		// Zone ranges survive a dropped database; remove ours first.
		for _, c := range spec.Collections {
			rs, _ := zoneRanges(ctx, a, spec.Namespace(c.Name))
			for _, r := range rs {
				_, _ = a.RunCommand(ctx, "admin", RemoveZoneKeyRangeCmd(r.NS, r.Min, r.Max))
			}
		}
		_ = a.Client.Database(spec.Database).Drop(ctx)
	})
	return spec
}

func TestLiveApplyIsIdempotent(t *testing.T) {
	ctx, a := liveAdmin(t)
	spec := liveSpec(ctx, t, a)
	var out bytes.Buffer
	first, err := Apply(ctx, a, spec, &out, false)
	if err != nil {
		t.Fatalf("first apply: %v\n%s", err, out.String())
	}
	out.Reset()
	second, err := Apply(ctx, a, spec, &out, false)
	if err != nil {
		t.Fatalf("second apply: %v\n%s", err, out.String())
	}
	if second.Ran != 0 {
		t.Errorf("second apply ran %d commands, want 0\n%s", second.Ran, out.String())
	}
	t.Logf("first apply ran %d, second skipped %d", first.Ran, second.Skipped)
}

func TestLiveFirehoseRoll(t *testing.T) {
	ctx, a := liveAdmin(t)
	spec := liveSpec(ctx, t, a)
	if _, err := Apply(ctx, a, spec, &bytes.Buffer{}, false); err != nil {
		t.Fatal(err)
	}
	events, _ := spec.Collection("events")
	n, err := Roll(ctx, a, spec, events, spec.FirehoseStart.AddDate(0, 0, 1), false, &bytes.Buffer{})
	if err != nil || n == 0 {
		t.Fatalf("roll to tomorrow: n=%d err=%v", n, err)
	}
	n, err = Roll(ctx, a, spec, events, spec.FirehoseStart.AddDate(0, 0, 1), false, &bytes.Buffer{})
	if err != nil || n != 0 {
		t.Errorf("second roll: n=%d err=%v, want 0 steps", n, err)
	}
}

func TestLiveBalancerStatusAndAutoSplit(t *testing.T) {
	ctx, a := liveAdmin(t)
	st, err := GetBalancerStatus(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode != "full" && st.Mode != "off" {
		t.Errorf("mode %q, want full or off", st.Mode)
	}
	as, err := GetAutoSplit(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("balancer %s; server %s auto-split noOp=%t", st, as.Version, as.NoOp)
}
