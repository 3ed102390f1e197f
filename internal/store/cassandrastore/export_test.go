package cassandrastore

import "testing"

// ClusterForTest gives the external tests (package cassandra_test) the running cluster and the
// keyspace TestMain prepared, failing the test if there is none.
func ClusterForTest(t testing.TB) (hosts []string, keyspace string) {
	t.Helper()
	store(t)
	return testHosts, testKeyspace
}

// CartsRepo is the carts repository's type, for the external tests that check what placement
// wired.
type CartsRepo = carts
