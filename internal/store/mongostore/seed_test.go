package mongostore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/demo/demotest"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/store/mongostore"
)

// TestDemoSeedIsCompleteAndFast seeds the 5,000-product demo with every family on the
// replica set, as `serve` does on a first start, and proves all of it readable.
func TestDemoSeedIsCompleteAndFast(t *testing.T) {
	uri := mongostore.URIForTest(t)
	cfg := placement.All(placement.Mongo)
	took := demotest.SeedAndVerify(t, func(t *testing.T) shop.Config {
		db := fmt.Sprintf("shardmart_seed_%d", time.Now().UnixNano())
		t.Cleanup(func() { dropDatabase(t, uri, db) })
		return shop.Config{Placement: cfg, Backends: placement.Options{MongoURI: uri, MongoDatabase: db}}
	})
	if took > 2*time.Minute {
		t.Errorf("seeding took %s", took)
	}
}

func dropDatabase(t testing.TB, uri, db string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		t.Errorf("connect to drop %s: %v", db, err)
		return
	}
	defer c.Disconnect(ctx)
	if err := c.Database(db).Drop(ctx); err != nil {
		t.Errorf("drop %s: %v", db, err)
	}
}
