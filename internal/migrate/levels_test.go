package migrate

import (
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// The migration's data statements take the shop client's quorum: LOCAL_QUORUM with a local DC,
// QUORUM without one or for a target made without levels.
func TestTargetDataLevelFollowsTheClient(t *testing.T) {
	if got := NewTarget(nil).quorum(); got != gocql.Quorum {
		t.Errorf("a target without levels: %s, want QUORUM", got)
	}
	tg := NewTarget(nil)
	tg.Levels = cassandrastore.Connection{Datacenter: "dc1"}.Levels()
	if got := tg.quorum(); got != gocql.LocalQuorum {
		t.Errorf("a target of a dc1 client: %s, want LOCAL_QUORUM", got)
	}
	tg.Levels = cassandrastore.Connection{Datacenter: "dc1", QuorumEveryDC: true}.Levels()
	if got := tg.quorum(); got != gocql.Quorum {
		t.Errorf("a target of a dc1 client with quorums over every DC: %s, want QUORUM", got)
	}
}
