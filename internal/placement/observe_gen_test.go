package placement

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
)

// The decorators are generated from the repository interfaces: a method added to an interface
// without `go generate ./internal/placement` fails here (and the build, since the decorator
// would no longer implement its interface).
func TestObserveGenIsCurrent(t *testing.T) {
	want, err := exec.Command("go", "run", "./observegen", "-o", "-").Output()
	if err != nil {
		t.Fatalf("observegen: %v", err)
	}
	got, err := os.ReadFile("observe_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("observe_gen.go is not what observegen writes now: run `go generate ./internal/placement`")
	}
}
