package roundtrips_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/roundtrips"
	"github.com/shardmart/shardmart/internal/shop"
)

// TestEmbeddedBudget: every request kind on the embedded placement runs at most its budget of
// SQL statements.
func TestEmbeddedBudget(t *testing.T) {
	tb, err := roundtrips.Measure(context.Background(), roundtrips.Embedded, shop.Config{Placement: placement.Embedded(),
		Backends: placement.Options{SQLitePath: filepath.Join(t.TempDir(), "shop.db")}})
	if err != nil {
		t.Fatal(err)
	}
	roundtrips.Check(t, tb)
}
