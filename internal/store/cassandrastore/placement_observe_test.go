package cassandrastore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// TestPlacementObservesCassandra: with carts on Cassandra a cart read is the operation
// "carts.active_cart" as on every backend, labelled cassandra, and the CQL below it is reported
// apart as statements.
func TestPlacementObservesCassandra(t *testing.T) {
	hosts, ks := cassandrastore.ClusterForTest(t)
	cfg := allOnCassandraConfig(t)
	var mu sync.Mutex
	ops, statements := map[string]bool{}, map[string]bool{}
	record := func(seen map[string]bool) func(backend, name string, _ time.Duration, _ error) {
		return func(backend, name string, _ time.Duration, _ error) {
			mu.Lock()
			defer mu.Unlock()
			seen[backend+" "+name] = true
		}
	}
	st, err := placement.Open(context.Background(), cfg, placement.Options{
		SQLitePath: filepath.Join(t.TempDir(), "orders.db"), CassandraHosts: hosts, CassandraKeyspace: ks,
		Observe: record(ops), ObserveStatement: record(statements)})
	if err != nil {
		t.Fatalf("placement.Open(%s): %v", cfg, err)
	}
	defer st.Close()
	if _, err := st.Carts.ActiveCart(context.Background(), cart.Guest("no-such-session"), time.Now()); !errors.Is(err, cart.ErrNotFound) {
		t.Fatalf("active cart of an unknown session: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !ops["cassandra carts.active_cart"] {
		t.Errorf("operations seen %v, want cassandra carts.active_cart", ops)
	}
	var selects bool
	for s := range statements {
		selects = selects || strings.HasPrefix(s, "cassandra select.")
	}
	if !selects {
		t.Errorf("statements seen %v, want a cassandra select.<table>", statements)
	}
}
