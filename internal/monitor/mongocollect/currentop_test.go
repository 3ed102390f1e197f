package mongocollect_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/eventually"
)

// A query held for 4 s on one shard ($where with sleep) shows as one long operation of its
// namespace on that shard once secs_running passes 1, and 0 on the other shard.
func TestCurrentOpCountsLongOperations(t *testing.T) {
	c, r := cluster(t)
	ctx := eventually.Context(t, time.Minute)
	ns, busy := oneChunk(ctx, t, r, 1, 0)
	idle := other(busy)
	db, coll, _ := strings.Cut(ns, ".")
	done := make(chan error, 1)
	go func() {
		// Read on the owning shard, as mongos would route it.
		cur, err := r.Shards[busy].Database(db).Collection(coll).Find(ctx, bson.D{{Key: "$where", Value: "sleep(4000) || true"}})
		if err == nil {
			err = cur.Close(ctx)
		}
		done <- err
	}()
	reg := exporter(t, c, "mongo_currentop")
	if err := eventually.Until(ctx, func() error {
		got := values(t, reg, "shardmart_mongo_long_operations")
		if got["namespace="+ns+",shard="+busy] == 1 {
			if n := got["namespace="+ns+",shard="+idle]; n != 0 {
				t.Errorf("long operations on the idle shard %s: %g, want 0", idle, n)
			}
			return nil
		}
		select {
		case err := <-done:
			return eventually.Stop(fmt.Errorf("the slow query ended (%v) and was never counted: last %v", err, got))
		default:
			return fmt.Errorf("not counted yet: %v", got)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
