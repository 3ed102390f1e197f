package sqlitestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/demo/demotest"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/shop"
)

// TestDemoSeedIsCompleteAndFast seeds the 5,000-product demo into a fresh embedded store, as
// `serve` does on a first start, and proves all of it readable.
func TestDemoSeedIsCompleteAndFast(t *testing.T) {
	took := demotest.SeedAndVerify(t, func(t *testing.T) shop.Config {
		return shop.Config{Placement: placement.Embedded(), Backends: placement.Options{SQLitePath: filepath.Join(t.TempDir(), "shardmart.db")}}
	})
	if took > time.Minute {
		t.Errorf("seeding took %s", took)
	}
}
