package mongocollect_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// A manual range move (moveRange, the balancer stopped) is one committed migration from the
// donor to the recipient in config.changelog.
func TestMigrationsGolden(t *testing.T) {
	c, r := cluster(t)
	ctx := ctxFor(t, 2*time.Minute)
	balancerOff(ctx, t, r)
	ns, from := oneChunk(ctx, t, r, 50, 10)
	to := other(from)
	if _, err := r.RunCommand(ctx, "admin", bson.D{{Key: "moveRange", Value: ns}, {Key: "toShard", Value: to},
		{Key: "min", Value: bson.D{{Key: "k", Value: bson.MinKey{}}}}}); err != nil {
		t.Fatal(err)
	}
	reg := exporter(t, c, "mongo_migrations")
	want := fmt.Sprintf(`
# HELP shardmart_mongo_migrations range migrations within --migration-window, by donor shard, recipient, collection and result (config.changelog)
# TYPE shardmart_mongo_migrations gauge
shardmart_mongo_migrations{namespace=%q,result="committed",shard=%q,to_shard=%q} 1
# HELP shardmart_monitor_collector_success 1 if the collector's last run succeeded
# TYPE shardmart_monitor_collector_success gauge
shardmart_monitor_collector_success{collector="mongo_migrations"} 1
`, ns, from, to)
	if err := testutil.GatherAndCompare(only(reg, ns), strings.NewReader(want), "shardmart_mongo_migrations", "shardmart_monitor_collector_success"); err != nil {
		t.Error(err)
	}
}
