package dualwrite

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// The wrappers are generated from the repository interfaces: a method added to an interface
// without `go generate ./internal/dualwrite` fails here (and the build, since the wrapper
// would no longer implement its interface).
func TestWrapGenIsCurrent(t *testing.T) {
	want, err := exec.Command("go", "run", "./wrapgen", "-o", "-").Output()
	if err != nil {
		t.Fatalf("wrapgen: %v", err)
	}
	got, err := os.ReadFile("wrap_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("wrap_gen.go is not what wrapgen writes now: run `go generate ./internal/dualwrite`")
	}
}
