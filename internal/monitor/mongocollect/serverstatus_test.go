package mongocollect_test

import (
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/eventually"
)

// serverStatus and hostInfo on each shard primary: the counters are volatile, so each series
// must be there for both shards with a sane value, and the collector must succeed.
func TestServerStatusSeries(t *testing.T) {
	c, _ := cluster(t)
	eventually.Context(t, time.Minute)
	reg := exporter(t, c, "mongo_serverstatus")
	if got := values(t, reg, "shardmart_monitor_collector_success"); got["collector=mongo_serverstatus"] != 1 {
		t.Fatalf("collector_success %v, want 1", got)
	}
	checks := []struct {
		metric string
		labels []string // per shard, after shard=…
		min    float64  // every value must be ≥ min
	}{
		{"shardmart_mongo_operations_total", []string{"type=command", "type=insert", "type=query", "type=update", "type=delete", "type=getmore"}, 0},
		{"shardmart_mongo_connections", []string{"state=current", "state=active"}, 1},
		{"shardmart_mongo_cpu_seconds_total", []string{"mode=user", "mode=system"}, 1e-6},
		{"shardmart_mongo_cpu_cores", []string{""}, 1},
		{"shardmart_mongo_op_latency_seconds_total", []string{"op=reads", "op=writes", "op=commands"}, 0},
		{"shardmart_mongo_op_latency_ops_total", []string{"op=reads", "op=writes", "op=commands"}, 0},
		{"shardmart_mongo_network_bytes_total", []string{"direction=in", "direction=out"}, 1},
	}
	for _, ck := range checks {
		got := values(t, reg, ck.metric)
		for _, sh := range []string{"sh0", "sh1"} {
			for _, l := range ck.labels {
				key := "shard=" + sh
				if l != "" {
					key = l + "," + key
					if l > "shard" {
						key = "shard=" + sh + "," + l
					}
				}
				v, ok := got[key]
				if !ok {
					t.Errorf("%s{%s} missing; have %v", ck.metric, key, got)
					continue
				}
				if v < ck.min {
					t.Errorf("%s{%s} = %g, want ≥ %g", ck.metric, key, v, ck.min)
				}
			}
		}
	}
	// Commands were answered (this scrape's own serverStatus at least): the counter moves.
	if got := values(t, reg, "shardmart_mongo_operations_total"); got["shard=sh0,type=command"] < 1 {
		t.Errorf("operations_total{type=command} on sh0 = %g, want > 0", got["shard=sh0,type=command"])
	}
}
