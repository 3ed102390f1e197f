package mongocollect_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/sharding"
)

// The balancer's state as the config server reports it (_configsvrBalancerStatus): stopped,
// then started again.
func TestBalancerGolden(t *testing.T) {
	c, r := cluster(t)
	ctx := eventually.Context(t, 2*time.Minute)
	reg := exporter(t, c, "mongo_balancer")
	const head = `
# HELP shardmart_mongo_balancer_enabled 1 if the balancer is enabled (balancerStatus mode is not off)
# TYPE shardmart_mongo_balancer_enabled gauge
`
	balancerOff(ctx, t, r)
	want := head + `shardmart_mongo_balancer_enabled{shard="config"} 0
# HELP shardmart_mongo_balancer_in_round 1 while a balancing round runs (balancerStatus inBalancerRound)
# TYPE shardmart_mongo_balancer_in_round gauge
shardmart_mongo_balancer_in_round{shard="config"} 0
# HELP shardmart_monitor_collector_success 1 if the collector's last run succeeded
# TYPE shardmart_monitor_collector_success gauge
shardmart_monitor_collector_success{collector="mongo_balancer"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "shardmart_mongo_balancer_enabled",
		"shardmart_mongo_balancer_in_round", "shardmart_monitor_collector_success"); err != nil {
		t.Error(err)
	}
	if err := sharding.StartBalancer(ctx, r); err != nil {
		t.Fatal(err)
	}
	want = head + `shardmart_mongo_balancer_enabled{shard="config"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "shardmart_mongo_balancer_enabled"); err != nil {
		t.Error(err)
	}
}
