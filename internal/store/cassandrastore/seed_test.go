package cassandrastore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/demo/demotest"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// TestDemoSeedIsCompleteAndFast seeds the 5,000-product demo on the hybrid placement (orders
// embedded; carts, sessions, events, history and the projector-fed catalog on the node), as
// `serve` does on a first start, and proves all of it readable, the catalog included.
func TestDemoSeedIsCompleteAndFast(t *testing.T) {
	hosts, _ := cassandrastore.ClusterForTest(t)
	cfg := allOnCassandraConfig(t)
	took := demotest.SeedAndVerify(t, func(t *testing.T) shop.Config {
		var b [4]byte
		_, _ = rand.Read(b[:])
		ks := "seed_" + hex.EncodeToString(b[:])
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if _, err := cassandrastore.ApplySchema(ctx, hosts, cassandrastore.SchemaOptions{Keyspace: ks, RF: 1}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dropKeyspace(t, hosts, ks) })
		return shop.Config{Placement: cfg, Backends: placement.Options{SQLitePath: filepath.Join(t.TempDir(), "orders.db"),
			CassandraHosts: hosts, CassandraKeyspace: ks}}
	})
	if took > 2*time.Minute {
		t.Errorf("seeding took %s", took)
	}
}

func dropKeyspace(t *testing.T, hosts []string, ks string) {
	// A schema change takes seconds on a loaded machine: a session of its own with a DDL timeout.
	s, err := cassandrastore.OpenSession(context.Background(), cassandrastore.Config{Hosts: hosts, Keyspace: ks, Timeout: 30 * time.Second})
	if err != nil {
		t.Errorf("open to drop %s: %v", ks, err)
		return
	}
	defer s.Close()
	if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).Exec(); err != nil {
		t.Errorf("drop %s: %v", ks, err)
	}
}
