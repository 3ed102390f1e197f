package cli

import (
	"errors"
	"strings"
	"testing"
)

func TestMongoMoveRangeMaxChunksFlag(t *testing.T) {
	t.Setenv("SHARDMART_MONGO_URI", "")
	// A known flag gets as far as needing a cluster.
	if _, err := runMongo(t, "move-range", "orders", "--to", "shard1", "--max-chunks", "3"); !errors.Is(err, errNoMongoURI) {
		t.Errorf("--max-chunks 3: err = %v, want errNoMongoURI", err)
	}
	if _, err := runMongo(t, "move-range", "orders", "--to", "shard1", "--max-chunks", "0"); err == nil || !strings.Contains(err.Error(), "--max-chunks") {
		t.Errorf("--max-chunks 0: err = %v, want a --max-chunks error", err)
	}
}
