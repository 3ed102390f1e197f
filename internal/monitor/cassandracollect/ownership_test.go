package cassandracollect

import (
	"math"
	"math/big"
	"testing"
)

// The live cluster has one rack and SimpleStrategy keyspaces; the rack rule of
// NetworkTopologyStrategy is checked here on a hand-made ring: with racks r1 r1 r2 r2 and
// RF 2, every range needs one replica per rack, so the node ahead of a same-rack neighbour
// is skipped and the first node of each rack holds three quarters of the ring.
func TestNetworkTopologyOwnershipPlacesOneReplicaPerRackFirst(t *testing.T) {
	r := &ring{span: murmur3Span}
	for i, rack := range []string{"r1", "r1", "r2", "r2"} {
		tok := new(big.Int).Mul(murmur3Span, big.NewInt(int64(i)))
		tok.Div(tok, big.NewInt(4))
		tok.Sub(tok, new(big.Int).Lsh(big.NewInt(1), 63))
		r.tokens = append(r.tokens, tok)
		r.owners = append(r.owners, endpoint{addr: []string{"a", "b", "c", "d"}[i], dc: "dc1", rack: rack})
	}
	st, ok := parseReplication(map[string]string{"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "2"})
	if !ok {
		t.Fatal("NetworkTopologyStrategy not recognised")
	}
	got := r.ownership(st)
	want := map[string]float64{"a": 0.75, "b": 0.25, "c": 0.75, "d": 0.25}
	for ep, w := range want {
		if math.Abs(got[ep]-w) > 1e-12 {
			t.Errorf("%s owns %v, want %v (all: %v)", ep, got[ep], w, got)
		}
	}
	// A factor above the node count caps at every node owning everything.
	st, _ = parseReplication(map[string]string{"class": "SimpleStrategy", "replication_factor": "5"})
	for ep, v := range r.ownership(st) {
		if v != 1 {
			t.Errorf("RF 5 on 4 nodes: %s owns %v, want 1", ep, v)
		}
	}
	if _, ok := parseReplication(map[string]string{"class": "org.apache.cassandra.locator.LocalStrategy"}); ok {
		t.Error("LocalStrategy keyspaces must be left out")
	}
}
