package placement

import (
	"testing"

	"github.com/shardmart/shardmart/internal/family"
)

// Every family has its slot, and exactly the families that move to Cassandra have a
// dual-write wrapper: a family added to internal/family without its slot fails here, not at
// the first shop start.
func TestEveryFamilyHasItsSlot(t *testing.T) {
	if len(slots) != len(family.Specs) {
		t.Errorf("%d slots for %d families", len(slots), len(family.Specs))
	}
	for _, spec := range family.Specs {
		sl, ok := slots[spec.Name]
		if !ok {
			t.Errorf("family %s has no slot", spec.Name)
			continue
		}
		if sl.fill == nil {
			t.Errorf("family %s: no fill", spec.Name)
		}
		if migrates := spec.MigrationOrder > 0; migrates != (sl.wrap != nil) {
			t.Errorf("family %s: migrates to Cassandra %v, has a dual-write wrapper %v", spec.Name, migrates, sl.wrap != nil)
		}
	}
}
