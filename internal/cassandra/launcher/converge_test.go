package launcher

import (
	"slices"
	"testing"
)

// A view lags only when a third running node sees the peer UN: a peer no other node sees up (a
// frozen or cut-off node) is no stale view, and a stopped node's view does not count.
func TestStaleViews(t *testing.T) {
	nodes := []Node{{Index: 0, Addr: "a"}, {Index: 1, Addr: "b"}, {Index: 2, Addr: "c"}}
	up := func(addrs ...string) map[string]bool {
		m := map[string]bool{}
		for _, a := range addrs {
			m[a] = true
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		views map[int]map[string]bool
		want  []StaleView
	}{
		{"converged", map[int]map[string]bool{0: up("a", "b", "c"), 1: up("a", "b", "c"), 2: up("a", "b", "c")}, nil},
		{"node 2 misses node 3", map[int]map[string]bool{0: up("a", "b", "c"), 1: up("a", "b"), 2: up("a", "b", "c")},
			[]StaleView{{Observer: 1, Peer: 2, Witness: 0}}},
		{"no other node sees node 3", map[int]map[string]bool{0: up("a", "b"), 1: up("a", "b"), 2: up("a", "b", "c")}, nil},
		{"node 3 stopped", map[int]map[string]bool{0: up("a", "b"), 1: up("a", "b")}, nil},
		{"node 3 frozen, seen by nobody else", map[int]map[string]bool{0: up("a", "b"), 1: up("a", "b"), 2: up("c")},
			[]StaleView{{Observer: 2, Peer: 0, Witness: 1}, {Observer: 2, Peer: 1, Witness: 0}}},
	} {
		got := staleViews(nodes, tc.views)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
