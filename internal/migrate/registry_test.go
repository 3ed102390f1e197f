package migrate

import (
	"testing"

	"github.com/shardmart/shardmart/internal/family"
)

// The engine has a codec for exactly the families internal/family says move to Cassandra.
func TestEveryMigratingFamilyHasACodec(t *testing.T) {
	want := family.ToCassandra()
	if len(registry) != len(want) {
		t.Errorf("%d codecs for %d migrating families", len(registry), len(want))
	}
	for _, f := range want {
		if _, err := codecOf(f); err != nil {
			t.Errorf("family %s: %v", f, err)
		}
	}
	if _, err := codecOf(family.Orders); err == nil {
		t.Error("orders have a codec, but they do not move to Cassandra")
	}
}
