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

// MON-1: a hashed collection presplit over both shards, with documents placed as mongos would route
// them: chunks, documents, data size and orphans per shard, and both shards up, exactly.
func TestCollStatsChunksShardsGolden(t *testing.T) {
	c, r := cluster(t)
	ctx := eventually.Context(t, 2*time.Minute)
	balancerOff(ctx, t, r) // chunks stay where shardCollection put them
	ns := liveNS(t)
	shardColl(ctx, t, r, ns, bson.D{{Key: "k", Value: "hashed"}})
	docs, size := items(400, 100)
	placed, err := r.Place(ctx, ns, docs)
	if err != nil {
		t.Fatal(err)
	}
	if placed["sh0"] == 0 || placed["sh1"] == 0 {
		t.Fatalf("placed %v: want documents on both shards", placed)
	}
	reg := exporter(t, c, "mongo_shards", "mongo_chunks", "mongo_collstats")
	want := fmt.Sprintf(`
# HELP shardmart_mongo_collection_chunks chunks of the collection owned by the shard (config.chunks; a secondary signal since 6.0.3)
# TYPE shardmart_mongo_collection_chunks gauge
shardmart_mongo_collection_chunks{namespace="%[1]s",shard="sh0"} 2
shardmart_mongo_collection_chunks{namespace="%[1]s",shard="sh1"} 2
# HELP shardmart_mongo_collection_data_bytes uncompressed data of the collection on the shard, orphans excluded ($collStats storageStats.size × owned/count)
# TYPE shardmart_mongo_collection_data_bytes gauge
shardmart_mongo_collection_data_bytes{namespace="%[1]s",shard="sh0"} %[2]d
shardmart_mongo_collection_data_bytes{namespace="%[1]s",shard="sh1"} %[3]d
# HELP shardmart_mongo_collection_documents documents of the collection on the shard, orphans excluded (storageStats.count − numOrphanDocs)
# TYPE shardmart_mongo_collection_documents gauge
shardmart_mongo_collection_documents{namespace="%[1]s",shard="sh0"} %[4]d
shardmart_mongo_collection_documents{namespace="%[1]s",shard="sh1"} %[5]d
# HELP shardmart_mongo_collection_orphan_documents documents of ranges the shard no longer owns, awaiting deletion (storageStats.numOrphanDocs)
# TYPE shardmart_mongo_collection_orphan_documents gauge
shardmart_mongo_collection_orphan_documents{namespace="%[1]s",shard="sh0"} 0
shardmart_mongo_collection_orphan_documents{namespace="%[1]s",shard="sh1"} 0
# HELP shardmart_mongo_shard_up 1 if the shard primary answered this scrape
# TYPE shardmart_mongo_shard_up gauge
shardmart_mongo_shard_up{shard="sh0"} 1
shardmart_mongo_shard_up{shard="sh1"} 1
# HELP shardmart_monitor_collector_success 1 if the collector's last run succeeded
# TYPE shardmart_monitor_collector_success gauge
shardmart_monitor_collector_success{collector="mongo_chunks"} 1
shardmart_monitor_collector_success{collector="mongo_collstats"} 1
shardmart_monitor_collector_success{collector="mongo_shards"} 1
`, ns, placed["sh0"]*size, placed["sh1"]*size, placed["sh0"], placed["sh1"])
	if err := testutil.GatherAndCompare(only(reg, ns), strings.NewReader(want),
		"shardmart_mongo_collection_chunks", "shardmart_mongo_collection_data_bytes", "shardmart_mongo_collection_documents",
		"shardmart_mongo_collection_orphan_documents", "shardmart_mongo_shard_up", "shardmart_monitor_collector_success"); err != nil {
		t.Error(err)
	}
	// The inserts went to each shard directly: their writes count there, per collection.
	writes := map[string]float64{}
	mfs, err := only(reg, ns).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "shardmart_mongo_collection_operations_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if op, _ := label(m, "op"); op == "writes" {
				sh, _ := label(m, "shard")
				writes[sh] = m.GetCounter().GetValue()
			}
		}
	}
	for _, sh := range []string{"sh0", "sh1"} {
		if writes[sh] < 1 {
			t.Errorf("collection writes on %s: %v, want the inserts counted", sh, writes[sh])
		}
	}
}
