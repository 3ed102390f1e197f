package cassandrastore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/roundtrips"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// TestRoundTripBudget: every request kind on the Cassandra placement (orders, products and
// users embedded, the other families on the node) runs at most its budget of statements,
// counted through the drivers' observers (roundtrips.Budgets).
func TestRoundTripBudget(t *testing.T) {
	hosts, ks := cassandrastore.ClusterForTest(t)
	tb, err := roundtrips.Measure(context.Background(), roundtrips.Cassandra, shop.Config{Placement: allOnCassandraConfig(t),
		Backends: placement.Options{SQLitePath: filepath.Join(t.TempDir(), "orders.db"), CassandraHosts: hosts, CassandraKeyspace: ks}})
	if err != nil {
		t.Fatal(err)
	}
	roundtrips.Check(t, tb)
}
