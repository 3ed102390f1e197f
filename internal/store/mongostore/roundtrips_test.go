package mongostore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/roundtrips"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/store/mongostore"
)

// TestRoundTripBudget: every request kind with every family on MongoDB runs at most its budget
// of wire commands, counted through the driver's command monitor (roundtrips.Budgets).
func TestRoundTripBudget(t *testing.T) {
	uri := mongostore.URIForTest(t)
	cfg := placement.All(placement.Mongo)
	db := fmt.Sprintf("roundtrips_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c, err := mongo.Connect(options.Client().ApplyURI(uri))
		if err != nil {
			t.Errorf("drop %s: %v", db, err)
			return
		}
		defer c.Disconnect(ctx)
		if err := c.Database(db).Drop(ctx); err != nil {
			t.Errorf("drop %s: %v", db, err)
		}
	})
	tb, err := roundtrips.Measure(context.Background(), roundtrips.MongoDB, shop.Config{Placement: cfg,
		Backends: placement.Options{MongoURI: uri, MongoDatabase: db}})
	if err != nil {
		t.Fatal(err)
	}
	roundtrips.Check(t, tb)
}
