package placement

import (
	"testing"

	"github.com/shardmart/shardmart/internal/ifacegen"
)

// The decorators are generated from the repository interfaces: a method added to an interface
// without `go generate ./internal/placement` fails here (and the build, since the decorator
// would no longer implement its interface).
func TestObserveGenIsCurrent(t *testing.T) {
	if err := ifacegen.CheckCurrent("./observegen", "observe_gen.go"); err != nil {
		t.Fatalf("%v: run `go generate ./internal/placement`", err)
	}
}
