// Package demotest seeds the demo data set on a placement in tests and proves it complete,
// the same way on every backend; each backend's tests call it against their own servers.
package demotest

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/shop"
)

// BaselineEnv, set to 1, also runs the unbatched seed (demo.Options.OneByOne) before the
// batched one, each on a fresh store, and logs both times: docs/evidence/benchmarks.md's before/after.
const BaselineEnv = "SHARDMART_SEED_BASELINE"

// SeedAndVerify opens the shop fresh() configures (a fresh, empty store each call), seeds the
// default demo data set the way serve does (seed, then drain the projector), and fails unless
// demo.Verify finds all of it readable. It returns the seeding time.
func SeedAndVerify(t *testing.T, fresh func(t *testing.T) shop.Config) time.Duration {
	t.Helper()
	if os.Getenv(BaselineEnv) == "1" {
		before := seed(t, fresh(t), true)
		t.Logf("seed one by one (before): %s", before.Round(time.Millisecond))
	}
	after := seed(t, fresh(t), false)
	t.Logf("seed batched (after): %s", after.Round(time.Millisecond))
	return after
}

func seed(t *testing.T, cfg shop.Config, oneByOne bool) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := shop.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opt := demo.Defaults()
	opt.OneByOne = oneByOne
	if oneByOne {
		s.Projector.Workers = 1 // as before: the projector applied one message at a time
	}
	start := time.Now()
	res, err := demo.Seed(ctx, s.Stores, s.Orders, s.Carts, opt)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	if _, err := s.Projector.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	took := time.Since(start)
	if res.Products != opt.Products || res.Users != opt.Users || res.Orders == 0 || res.Events == 0 {
		t.Errorf("seeded %+v", res)
	}
	if err := demo.Verify(ctx, s.Stores, opt, res); err != nil {
		t.Errorf("seeded data incomplete (one by one: %v): %v", oneByOne, err)
	}
	return took
}
