package loadgen_test

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestK6ScriptParses checks deploy/k6/shop.js, the same mix for k6: with k6 when it is
// installed (`go install go.k6.io/k6@latest`), else its JavaScript syntax with node.
func TestK6ScriptParses(t *testing.T) {
	script := filepath.Join("..", "..", "deploy", "k6", "shop.js")
	if k6, err := exec.LookPath("k6"); err == nil {
		if out, err := exec.Command(k6, "inspect", script).CombinedOutput(); err != nil {
			t.Fatalf("k6 inspect: %v\n%s", err, out)
		}
		return
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("neither k6 nor node on PATH to check deploy/k6/shop.js: go install go.k6.io/k6@v1.8.1 (.ci/run does it when both are missing)")
	}
	if out, err := exec.Command(node, "--check", script).CombinedOutput(); err != nil {
		t.Fatalf("node --check: %v\n%s", err, out)
	}
}
