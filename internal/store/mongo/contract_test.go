package mongo

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/sharding"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

// TestContract runs THE contract suite against a live MongoDB: SHARDMART_MONGO_URI names a mongos
// of a sharded cluster (deploy/mongodb). It uses a fresh database per run, shards its
// collections on ShardKeys when the URI is a mongos, and drops the database afterwards.
func TestContract(t *testing.T) {
	uri := os.Getenv("SHARDMART_MONGO_URI")
	if uri == "" {
		t.Skip("SHARDMART_MONGO_URI not set: MongoDB contract suite skipped (it has NOT run; start a sharded cluster, see deploy/mongodb)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbName := fmt.Sprintf("shardmart_test_%d", time.Now().UnixNano())
	s, err := Open(ctx, Options{URI: uri, Database: dbName})
	if err != nil {
		t.Fatalf("open %s: %v", redact(uri), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.db.Drop(ctx); err != nil {
			t.Errorf("drop test database %s: %v", dbName, err)
		}
		_ = s.Close()
	})
	var hello struct {
		Msg string `bson:"msg"`
	}
	if err := s.client.Database("admin").RunCommand(ctx, d(e("hello", 1))).Decode(&hello); err != nil {
		t.Fatalf("hello: %v", err)
	}
	if hello.Msg == "isdbgrid" {
		shardTestDatabase(ctx, t, s, dbName)
		t.Logf("database %s on a mongos: collections sharded on ShardKeys", dbName)
	} else {
		t.Logf("database %s: %s is not a mongos, collections left unsharded (targeting is NOT exercised)", dbName, redact(uri))
	}
	storetest.Products(t, func(*testing.T) catalog.Repository { return s.Products() })
	storetest.Orders(t, func(*testing.T) storetest.OrderStore {
		return storetest.OrderStore{Orders: s.Orders(), Products: s.Products(), Outbox: s.Outbox()}
	})
	storetest.Carts(t, func(*testing.T) cart.Repository { return s.Carts() })
	storetest.Sessions(t, func(*testing.T) session.Repository { return s.Sessions() })
	storetest.Events(t, func(*testing.T) event.Repository { return s.Events() })
	storetest.Users(t, func(*testing.T) account.Repository { return s.Users() })
	storetest.History(t, func(*testing.T) history.Repository { return s.History() })
}

// shardTestDatabase shards the test database's collections the way production is sharded,
// with the sharding package's command builders (no zones: they name the cluster's shards).
func shardTestDatabase(ctx context.Context, t *testing.T, s *Store, db string) {
	t.Helper()
	admin := sharding.DriverAdmin{Client: s.client}
	if _, err := admin.RunCommand(ctx, "admin", sharding.EnableShardingCmd(db)); err != nil {
		t.Fatalf("enable sharding: %v", err)
	}
	for coll, key := range ShardKeys {
		cmd := d(e("shardCollection", db+"."+coll), e("key", key))
		if _, err := admin.RunCommand(ctx, "admin", cmd); err != nil {
			t.Fatalf("shard %s on %v: %v", coll, key, err)
		}
	}
}
