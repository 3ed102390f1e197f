package advise

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/sharding"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// The SVG is pinned byte for byte: its drawer is shared with the monitor's page
// (internal/sharechart), and a change made for one must not move the other silently.
func TestWriteSVGPinned(t *testing.T) {
	results := []*Result{
		{Collection: "carts", Key: sharding.Key{{Name: "user_id", Kind: sharding.Hashed}}, Shards: 3, Ticks: 4, TickLength: 12 * time.Hour,
			Data:   [][]int64{{10, 0, 0}, {10, 5, 0}, {10, 5, 5}, {0, 0, 0}},
			Writes: [][]int64{{3, 0, 0}, {0, 0, 0}, {1, 1, 1}, {0, 2, 6}}},
		{Collection: "a<b & \"c\"", Key: sharding.Key{{Name: "ts", Kind: sharding.Ascending}}, Zones: []string{"eu"}, Shards: 2, Ticks: 3, TickLength: 24 * time.Hour,
			Data:   [][]int64{{1, 0}, {2, 1}, {2, 2}},
			Writes: [][]int64{{1, 0}, {1, 0}, {1, 1}}},
		{Collection: "orders", Key: sharding.Key{{Name: "_id", Kind: sharding.Descending}}, Shards: 1, Ticks: 1, TickLength: time.Hour,
			Data: [][]int64{{7}}, Writes: [][]int64{{7}}},
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, "pinned <title>", results); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "pinned.svg")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("WriteSVG differs from %s (rerun with -update only for an intended change)\ngot:\n%s", golden, b.Bytes())
	}
}
