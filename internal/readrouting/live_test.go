package readrouting

import (
	"context"
	"os"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// TestLiveMonitor measures real lag through every shard's replica set.
func TestLiveMonitor(t *testing.T) {
	uri := os.Getenv("SHARDMART_MONGO_URI")
	if uri == "" {
		t.Skip("SHARDMART_MONGO_URI not set: live MongoDB sharding tests skipped (start a sharded cluster, see deploy/mongodb)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mongos, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mongos.Disconnect(context.Background()) }()
	uris, err := ShardURIs(ctx, mongos, uri)
	if err != nil || len(uris) == 0 {
		t.Fatalf("shard URIs: %v (%d shards)", err, len(uris))
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
	snap := NewMonitor(sources, time.Second).Measure(ctx)
	if len(snap.Errors) > 0 {
		t.Fatalf("shard status errors: %v", snap.Errors)
	}
	for _, m := range snap.Members {
		t.Logf("%s %s %s lag=%s known=%t", m.Shard, m.Host, m.State, m.Lag, m.Known)
	}
	d := NewPolicy().Decide(OpOrderHistory, snap, time.Now())
	t.Logf("order history read goes to %s: %s", d.Target, d.Reason)
}
