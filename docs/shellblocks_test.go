package docs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/yuin/goldmark/ast"
)

// A fenced shell block (sh, bash, shell, console, zsh) in the README or a guide says, on the
// line before it, how the tests cover it:
//
//	<!-- runs: <package dir> <TestName>[; <package dir> <TestName>] -->
//
// a test that runs the block's commands (the package dir may also be a CI script that runs
// them, such as .ci/run for `make test`), or
//
//	<!-- needs: <what> -->
//
// a cluster or server the tests start (one of needs below), for a block that only runs against
// one. The comment shows in the Markdown source and not on the rendered page.
var shellMarker = regexp.MustCompile(`^<!--\s*(runs|needs):\s*(.+?)\s*-->$`)

// blocksRunHere names the test below, which runs every block marked with it.
const blocksRunHere = "docs TestGuideShellBlocksRun"

// needs is what a block may need, with tests that start it and run commands like the block's
// against it.
var needs = map[string][]string{
	"mongodb replica set":         {"internal/cli TestServeShoppingFlowOnMongoReplicaSet", "internal/cli TestAdviseFromReplicaSet"},
	"mongodb sharded cluster":     {"internal/cli TestMongoUpShardsStatusDown", "internal/monitor TestPageOnRealCluster"},
	"cassandra cluster":           {"internal/store/cassandrastore TestHybridPlacementShoppingFlow", "internal/cli TestMigrateEmbeddedShopTo3Nodes"},
	"shardmart server":            {"internal/cli TestServeSeedsAndShutsDownGracefully", "internal/cli TestBenchServerSeededBeforeReturning"},
	"prometheus and alertmanager": {"deploy/monitoring TestHotShardAlertMailedAndResolvedByTheBalancer"},
}

type shellBlock struct {
	file, script string
	line         int
	kind, what   string // from the marker; empty when there is none
}

// userShellBlocks returns the shell blocks of the README and the guides, as the renderer parses
// them.
func userShellBlocks(t *testing.T) []shellBlock {
	t.Helper()
	files, err := filepath.Glob("guides/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../README.md"}, files...)
	var blocks []shellBlock
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := renderPage(src)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		err = ast.Walk(p.doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			code, ok := n.(*ast.FencedCodeBlock)
			if !entering || !ok || code.Info == nil {
				return ast.WalkContinue, nil
			}
			lang, _, _ := strings.Cut(string(code.Info.Value(src)), " ")
			switch lang {
			case "sh", "bash", "shell", "console", "zsh":
			default:
				return ast.WalkSkipChildren, nil
			}
			b := shellBlock{file: f, line: bytes.Count(src[:code.Info.Segment.Start], []byte("\n")) + 1}
			var script strings.Builder
			lines := code.Lines()
			for i := 0; i < lines.Len(); i++ {
				seg := lines.At(i)
				script.Write(seg.Value(src))
			}
			b.script = script.String()
			if prev, ok := code.PreviousSibling().(*ast.HTMLBlock); ok {
				var comment strings.Builder
				lines := prev.Lines()
				for i := 0; i < lines.Len(); i++ {
					seg := lines.At(i)
					comment.Write(seg.Value(src))
				}
				if m := shellMarker.FindStringSubmatch(strings.TrimSpace(comment.String())); m != nil {
					b.kind, b.what = m[1], m[2]
				}
			}
			blocks = append(blocks, b)
			return ast.WalkSkipChildren, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return blocks
}

// testExists reports whether "dir TestName" names a test function in dir, relative to the
// repository root.
func testExists(ref string) error {
	dir, name, ok := strings.Cut(ref, " ")
	if !ok {
		info, err := os.Stat(filepath.Join("..", ref))
		if err != nil || info.Mode()&0o111 == 0 {
			return fmt.Errorf("%q is neither <package dir> <TestName> nor an executable script of the repository", ref)
		}
		return nil
	}
	files, err := filepath.Glob(filepath.Join("..", dir, "*_test.go"))
	if err != nil {
		return err
	}
	decl := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(name) + `\(t \*testing\.T\)`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if decl.Match(b) {
			return nil
		}
	}
	return fmt.Errorf("no test %s in %s", name, dir)
}

// TestShellBlocksRunOrSayWhatTheyNeed: every shell block of the README and the guides is run by
// a test that exists, or needs a cluster or server that the named tests start.
func TestShellBlocksRunOrSayWhatTheyNeed(t *testing.T) {
	blocks := userShellBlocks(t)
	if len(blocks) < 20 {
		t.Fatalf("%d shell blocks in the README and the guides, want the 30 or so they have", len(blocks))
	}
	wants := make([]string, 0, len(needs))
	for w := range needs {
		wants = append(wants, w)
	}
	sort.Strings(wants)
	for w, refs := range needs {
		for _, ref := range refs {
			if err := testExists(ref); err != nil {
				t.Errorf("needs %q: %v", w, err)
			}
		}
	}
	for _, b := range blocks {
		at := fmt.Sprintf("%s:%d", b.file, b.line)
		switch b.kind {
		case "runs":
			for _, ref := range strings.Split(b.what, ";") {
				if err := testExists(strings.TrimSpace(ref)); err != nil {
					t.Errorf("%s: the block's runs marker: %v", at, err)
				}
			}
		case "needs":
			if needs[b.what] == nil {
				t.Errorf("%s: needs %q, want one of %q (or add it, with tests that start it, to needs in docs/shellblocks_test.go)", at, b.what, wants)
			}
		default:
			t.Errorf("%s: a shell block that no test runs and that says nothing of what it needs: run it in a test and put "+
				"<!-- runs: <package dir> <TestName> --> on the line before it (offline commands: mark it <!-- runs: %s --> and %s runs it), "+
				"or mark it <!-- needs: <what> --> with one of %q", at, blocksRunHere, blocksRunHere, wants)
		}
	}
}

// TestGuideShellBlocksRun runs, with bash and a shardmart binary built from this tree first on
// the PATH, each shell block marked <!-- runs: docs TestGuideShellBlocksRun -->: the offline
// ones (the shard-key advisor's scenarios and a workload file, the sharding plan). Each runs
// under set -euo pipefail in an empty directory holding workload.yaml (the built-in orders
// scenario, for the block that reads one) and must exit 0 having printed something.
func TestGuideShellBlocksRun(t *testing.T) {
	var run []shellBlock
	for _, b := range userShellBlocks(t) {
		if b.kind != "runs" {
			continue
		}
		for _, ref := range strings.Split(b.what, ";") {
			if strings.TrimSpace(ref) == blocksRunHere {
				run = append(run, b)
			}
		}
	}
	if len(run) == 0 {
		t.Fatalf("no shell block is marked <!-- runs: %s -->", blocksRunHere)
	}
	bin := t.TempDir()
	start := time.Now()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "shardmart"), "./cmd/shardmart")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/shardmart: %v\n%s", err, out)
	}
	t.Logf("built shardmart in %s", time.Since(start).Round(time.Millisecond))
	workload, err := os.ReadFile("../internal/advise/scenarios/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHARDMART_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, b := range run {
		t.Run(fmt.Sprintf("%s:%d", filepath.Base(b.file), b.line), func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "workload.yaml"), workload, 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+b.script)
			cmd.Dir, cmd.Env = dir, env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s:%d: %v\n%s\nstderr:\n%s", b.file, b.line, err, b.script, stderr.String())
			}
			t.Logf("%s:%d ran in %s", b.file, b.line, time.Since(start).Round(time.Millisecond))
			if strings.TrimSpace(stdout.String()) == "" {
				t.Errorf("%s:%d printed nothing:\n%s", b.file, b.line, b.script)
			}
		})
	}
}
