package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runAdviseCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return execRoot(t, append([]string{"advise"}, args...)...)
}

func TestAdviseListsScenarios(t *testing.T) {
	out, _, err := runAdviseCmd(t, "--list")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"orders", "products", "carts", "ascending", "random", "location", "firehose", "multihotspot"} {
		if !strings.Contains(out, name) {
			t.Errorf("--list output lacks %q:\n%s", name, out)
		}
	}
}

func TestAdviseScenarioPrintsComparisonAndSVG(t *testing.T) {
	dir := t.TempDir()
	svg, jsonPath := filepath.Join(dir, "carts.svg"), filepath.Join(dir, "carts.json")
	out, errOut, err := runAdviseCmd(t, "--scenario", "carts", "--ops", "30000", "--shards", "3", "--seed", "9", "--svg", svg, "--json", jsonPath, "--moves", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"{_id: hashed}", "{user_id: hashed}", "jumbo chunks", "{user_id: null}", "3 shards", "seed 9", "shard 2", "chunk moves:", "range from {user_id: NumberLong("} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "ops/s") {
		t.Errorf("progress lacks a rate: %q", errOut)
	}
	jb, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var results []struct {
		Collection string
		Data       [][]int64
		Jumbo      []struct{ Key string }
	}
	if err := json.Unmarshal(jb, &results); err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[1].Collection != "carts" || len(results[1].Data) != 48 || len(results[1].Jumbo) != 1 {
		t.Errorf("json: got %d results, want 2 carts results with 48 ticks and the null jumbo chunk on the second", len(results))
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("<svg")) || !bytes.Contains(b, []byte("<polyline")) {
		t.Errorf("svg: got %.80q…, want an svg with polylines", b)
	}
}

func TestAdviseInputErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(bad, []byte("name: x\ncolections: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{}, "give exactly one of --scenario"},
		{[]string{"--scenario", "nope"}, `unknown scenario "nope"`},
		{[]string{"-f", bad}, "w.yaml:2: colections: unknown field"},
		{[]string{"--scenario", "location", "--shards", "2"}, "uses shard 2"},
	}
	for _, tt := range tests {
		_, _, err := runAdviseCmd(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("advise %v: got %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}

// advise's flags are flags only: SHARDMART_SHARDS and SHARDMART_SEED, which
// once set --shards and --seed, are not deployment settings and change nothing.
func TestAdviseFlagsIgnoreEnvironment(t *testing.T) {
	t.Setenv("SHARDMART_SHARDS", "5")
	t.Setenv("SHARDMART_SEED", "7")
	var got adviseOptions
	root := newRootCmd(IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	root.AddCommand(newCmdAdvise(IO{}, func(_ context.Context, o adviseOptions) error { got = o; return nil }))
	root.SetArgs([]string{"advise", "--scenario", "random"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if got.ShardsSet || got.SeedSet || got.Shards != 0 || got.Seed != 0 {
		t.Errorf("advise options %+v: SHARDMART_SHARDS/SHARDMART_SEED reached --shards/--seed", got)
	}
	out, _, err := runAdviseCmd(t, "--scenario", "random", "--ops", "5000")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "5 shards") {
		t.Errorf("SHARDMART_SHARDS=5 still sets --shards:\n%.400s", out)
	}
}

func TestAdviseAllScenarios(t *testing.T) {
	out, _, err := runAdviseCmd(t, "--scenario", "all", "--ops", "3000")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ascending", "carts", "firehose", "location", "multihotspot", "orders", "products", "random", "tiers"} {
		if !strings.Contains(out, "== "+name+" / ") {
			t.Errorf("--scenario all lacks %s", name)
		}
	}
}
