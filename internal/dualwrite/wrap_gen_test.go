package dualwrite

import (
	"testing"

	"github.com/shardmart/shardmart/internal/ifacegen"
)

// The wrappers are generated from the repository interfaces: a method added to an interface
// without `go generate ./internal/dualwrite` fails here (and the build, since the wrapper
// would no longer implement its interface).
func TestWrapGenIsCurrent(t *testing.T) {
	if err := ifacegen.CheckCurrent("./wrapgen", "wrap_gen.go"); err != nil {
		t.Fatalf("%v: run `go generate ./internal/dualwrite`", err)
	}
}
