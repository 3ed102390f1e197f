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

// Each shard of the live cluster is a 1-member replica set: its oplog window is never negative
// and grows (so turns positive) when the shard takes writes (an idle new set may have written
// nothing since it was initiated); its member is its own primary, so 0 s behind it, and its
// headroom is the whole window.
func TestReplicationOplogWindowAndLag(t *testing.T) {
	c, _ := cluster(t)
	ctx := eventually.Context(t, time.Minute)
	reg := exporter(t, c, "mongo_replication")
	before := values(t, reg, "shardmart_mongo_oplog_window_seconds")
	if len(before) != len(c.Shards) {
		t.Fatalf("oplog windows %v: want one per shard (%d)", before, len(c.Shards))
	}
	behind := values(t, reg, "shardmart_mongo_member_behind_primary_seconds")
	headroom := values(t, reg, "shardmart_mongo_member_oplog_headroom_seconds")
	for _, s := range c.Shards {
		set, member := "set="+s.Name(), fmt.Sprintf("member=%s,set=%s", s.Members()[0].Host, s.Name())
		w := before[set]
		if w < 0 {
			t.Errorf("%s: oplog window %v s, want ≥ 0", s.Name(), w)
		}
		if b, ok := behind[member]; !ok || b != 0 {
			t.Errorf("%s: behind its primary %v s (present %t), want 0 (it is the primary)", member, b, ok)
		}
		if h, ok := headroom[member]; !ok || h != w {
			t.Errorf("%s: headroom %v s (present %t), want the window %v s", member, h, ok, w)
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
