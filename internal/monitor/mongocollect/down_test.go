package mongocollect_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/eventually"
)

// MON-1: a shard killed with SIGKILL is shard_up 0; the scrape still succeeds and so does every
// collector: the down shard's per-shard series (collStats, currentOp, serverStatus) are absent,
// its chunk counts (config server data) stay. The same clients see it up again once it is back.
func TestShardDownIsAMetric(t *testing.T) {
	c, r := cluster(t)
	ctx := eventually.Context(t, 2*time.Minute)
	ns := liveNS(t)
	shardColl(ctx, t, r, ns, bson.D{{Key: "k", Value: "hashed"}})
	reg := exporter(t, c)
	if got := values(t, reg, "shardmart_mongo_shard_up"); got["shard=sh1"] != 1 {
		t.Fatalf("before the kill: shard_up %v, want sh1 up", got)
	}

	down := c.Shards[1]
	if err := down.Kill(ctx, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := down.StartMember(ctx, 0); err != nil {
			t.Errorf("restart %s: %v", down.Name(), err)
		}
		if _, err := down.WaitPrimary(ctx); err != nil {
			t.Errorf("restart %s: %v", down.Name(), err)
		}
	})

	start := time.Now()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("scrape with a shard down: %v", err)
	}
	scrape := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, nil })
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("scrape took %s, want within the 10 s scrape timeout", took)
	}
	t.Logf("scrape with sh1 down: %d families in %s", len(mfs), time.Since(start).Round(time.Millisecond))
	if got := values(t, scrape, "shardmart_mongo_shard_up"); got["shard=sh0"] != 1 || got["shard=sh1"] != 0 {
		t.Errorf("shard_up %v, want sh0 1 and sh1 0", got)
	}
	for k, v := range values(t, scrape, "shardmart_monitor_collector_success") {
		if v != 1 {
			t.Errorf("collector_success{%s} = %g, want 1 (a down shard is shard_up, not a failed collector)", k, v)
		}
	}
	docs := values(t, scrape, "shardmart_mongo_collection_documents")
	if _, ok := docs["namespace="+ns+",shard=sh1"]; ok {
		t.Errorf("documents on the down shard exported: %v", docs)
	}
	if _, ok := docs["namespace="+ns+",shard=sh0"]; !ok {
		t.Errorf("documents on the live shard missing: %v", docs)
	}
	if _, ok := values(t, scrape, "shardmart_mongo_connections")["shard=sh1,state=current"]; ok {
		t.Error("connections of the down shard exported")
	}
	if got := values(t, scrape, "shardmart_mongo_collection_chunks"); got["namespace="+ns+",shard=sh1"] != 2 {
		t.Errorf("chunks %v: want the down shard's 2 chunks still counted (config server data)", got)
	}

	if err := down.StartMember(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := eventually.Until(ctx, func() error {
		if got := values(t, reg, "shardmart_mongo_shard_up"); got["shard=sh1"] != 1 {
			return fmt.Errorf("shard_up %v", got)
		}
		return nil
	}); err != nil {
		t.Fatalf("sh1 restarted but never seen up again by the same exporter: %v", err)
	}
}
