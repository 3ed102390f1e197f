package mongocollect_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardmart/shardmart/internal/eventually"
)

// Each shard of the live cluster is a 1-member replica set: its primary reports itself healthy.
// The member cut off while another member is primary is the robustness test's
// (internal/testkit/robustness, TestShardedCluster): shard_up 1, that member 0.
func TestShardMembersUp(t *testing.T) {
	c, _ := cluster(t)
	eventually.Context(t, time.Minute)
	reg := exporter(t, c, "mongo_members")
	var want strings.Builder
	want.WriteString("# HELP shardmart_mongo_shard_member_up 1 if the shard primary reaches the member (replSetGetStatus health), 0 if it does not\n")
	want.WriteString("# TYPE shardmart_mongo_shard_member_up gauge\n")
	for _, s := range c.Shards {
		fmt.Fprintf(&want, "shardmart_mongo_shard_member_up{member=%q,shard=%q} 1\n", s.Members()[0].Host, s.Name())
	}
	want.WriteString(`# HELP shardmart_monitor_collector_success 1 if the collector's last run succeeded
# TYPE shardmart_monitor_collector_success gauge
shardmart_monitor_collector_success{collector="mongo_members"} 1
`)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want.String()), "shardmart_mongo_shard_member_up", "shardmart_monitor_collector_success"); err != nil {
		t.Error(err)
	}
}
