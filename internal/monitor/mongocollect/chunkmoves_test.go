package mongocollect_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/eventually"
)

// A manual range move (moveRange, the balancer stopped) is one committed chunk move from the
// donor to the recipient in config.changelog.
func TestChunkMovesGolden(t *testing.T) {
	c, r := cluster(t)
	ctx := eventually.Context(t, 2*time.Minute)
	balancerOff(ctx, t, r)
	ns, from := oneChunk(ctx, t, r, 50, 10)
	to := other(from)
	if _, err := r.RunCommand(ctx, "admin", bson.D{{Key: "moveRange", Value: ns}, {Key: "toShard", Value: to},
		{Key: "min", Value: bson.D{{Key: "k", Value: bson.MinKey{}}}}}); err != nil {
		t.Fatal(err)
	}
	reg := exporter(t, c, "mongo_chunk_moves")
	want := fmt.Sprintf(`
# HELP shardmart_mongo_chunk_moves chunk (range) moves within --chunk-move-window, by donor shard, recipient, collection and result (config.changelog)
# TYPE shardmart_mongo_chunk_moves gauge
shardmart_mongo_chunk_moves{namespace=%q,result="committed",shard=%q,to_shard=%q} 1
# HELP shardmart_monitor_collector_success 1 if the collector's last run succeeded
# TYPE shardmart_monitor_collector_success gauge
shardmart_monitor_collector_success{collector="mongo_chunk_moves"} 1
`, ns, from, to)
	if err := testutil.GatherAndCompare(only(reg, ns), strings.NewReader(want), "shardmart_mongo_chunk_moves", "shardmart_monitor_collector_success"); err != nil {
		t.Error(err)
	}
}
