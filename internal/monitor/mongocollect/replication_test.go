package mongocollect_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/eventually"
)

// Each shard of the live cluster is a 1-member replica set: its oplog window is positive and
// grows when the shard takes a write, its member's lag is under a second (the member is its own
// primary), and the headroom is the window less that lag.
func TestReplicationOplogWindowAndLag(t *testing.T) {
	c, _ := cluster(t)
	ctx := ctxFor(t, time.Minute)
	reg := exporter(t, c, "mongo_replication")
	before := values(t, reg, "shardmart_mongo_oplog_window_seconds")
	if len(before) != len(c.Shards) {
		t.Fatalf("oplog windows %v: want one per shard (%d)", before, len(c.Shards))
	}
	lags := values(t, reg, "shardmart_mongo_member_lag_seconds")
	headroom := values(t, reg, "shardmart_mongo_member_oplog_headroom_seconds")
	for _, s := range c.Shards {
		set, member := "set="+s.Name(), fmt.Sprintf("member=%s,set=%s", s.Members()[0].Host, s.Name())
		w, lag := before[set], lags[member]
		if w <= 0 {
			t.Errorf("%s: oplog window %v s, want > 0", s.Name(), w)
		}
		if l, ok := lags[member]; !ok || l < 0 || l >= 1 {
			t.Errorf("%s: lag %v (present %t), want in [0, 1) s", member, l, ok)
		}
		// The window was read after the status in the same scrape: at most a second apart.
		if h := headroom[member]; h > w || h < w-lag-1 {
			t.Errorf("%s: headroom %v s with window %v s and lag %v s", member, h, w, lag)
		}
	}
	// Writes on shard 0: its window (whole seconds of ts) grows once a write lands in a later
	// second than the last entry before.
	sh := c.Shards[0]
	cl, err := mongo.Connect(options.Client().ApplyURI(sh.URI()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Disconnect(ctx) })
	items := cl.Database(strings.TrimSuffix(liveNS(t), ".items")).Collection("items")
	eventually.True(t, 10*time.Second, "shard "+sh.Name()+"'s oplog window to grow as it takes writes", func() bool {
		if _, err := items.InsertOne(ctx, bson.D{{Key: "k", Value: 1}}); err != nil {
			t.Fatal(err)
		}
		return values(t, reg, "shardmart_mongo_oplog_window_seconds")["set="+sh.Name()] > before["set="+sh.Name()]
	})
}
