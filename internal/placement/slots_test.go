package placement

import (
	"testing"

	"github.com/shardmart/shardmart/internal/family"
)

// Every family has its fill: a family added to internal/family without one fails here, not at
// the first shop start.
func TestEveryFamilyHasItsFill(t *testing.T) {
	if len(fills) != len(family.Specs) {
		t.Errorf("%d fills for %d families", len(fills), len(family.Specs))
	}
	for _, spec := range family.Specs {
		if fills[spec.Name] == nil {
			t.Errorf("family %s has no fill", spec.Name)
		}
	}
}
