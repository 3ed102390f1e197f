package launcher

import (
	"strings"
	"testing"
)

// The paxos variant asked for is the one the node's cassandra.yaml names; none asked leaves
// the key out (Cassandra's default), and a variant Cassandra does not have is refused.
func TestPaxosVariantInConfig(t *testing.T) {
	for _, v := range []string{"", "v1", "v2"} {
		c, err := New(Options{Dir: t.TempDir(), PaxosVariant: v})
		if err != nil {
			t.Fatalf("variant %q: %v", v, err)
		}
		y := cassandraYAML(c, c.Nodes()[0])
		got := strings.Count(y, "paxos_variant:")
		switch {
		case v == "" && got != 0:
			t.Errorf("no variant asked: the config names one:\n%s", y)
		case v != "" && (got != 1 || !strings.Contains(y, "\npaxos_variant: "+v+"\n")):
			t.Errorf("variant %s: the config does not name it once:\n%s", v, y)
		}
	}
	if _, err := New(Options{Dir: t.TempDir(), PaxosVariant: "v3"}); err == nil {
		t.Error("paxos variant v3 accepted; want an error")
	}
}
