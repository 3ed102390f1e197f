package robustness

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/serverproc"
	"github.com/shardmart/shardmart/internal/shop"
)

// settings are the run's length, repetitions and seed: short in `make test`, longer through
// SHARDMART_ROBUSTNESS_DURATION, _REPEAT and _SEED.
type settings struct {
	duration time.Duration
	repeat   int
	seed     uint64
}

func runSettings(t *testing.T) settings {
	t.Helper()
	s := settings{duration: 8 * time.Second, repeat: 1, seed: uint64(time.Now().UnixNano())}
	if v := os.Getenv("SHARDMART_ROBUSTNESS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 4*time.Second {
			t.Fatalf("SHARDMART_ROBUSTNESS_DURATION=%q: want a duration of at least 4s (%v)", v, err)
		}
		s.duration = d
	}
	if v := os.Getenv("SHARDMART_ROBUSTNESS_REPEAT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SHARDMART_ROBUSTNESS_REPEAT=%q: want a positive count", v)
		}
		s.repeat = n
	}
	if v := os.Getenv("SHARDMART_ROBUSTNESS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SHARDMART_ROBUSTNESS_SEED=%q: want an unsigned integer", v)
		}
		s.seed = n
	}
	t.Logf("duration %s, repeat %d, seed %d (SHARDMART_ROBUSTNESS_SEED=%d replays the clients' choices)", s.duration, s.repeat, s.seed, s.seed)
	return s
}

var runs sync.Map // run names used, so that two runs never share ids

func runName(prefix string) string {
	for i := 0; ; i++ {
		n := fmt.Sprintf("%s%d%d", prefix, time.Now().UnixNano()%1_000_000_000, i)
		if _, taken := runs.LoadOrStore(n, true); !taken {
			return n
		}
	}
}

// TestSQLite runs every workload against the embedded store with no nemesis: it lives in the
// test process, so there is nothing to kill, pause or cut apart from the test itself.
func TestSQLite(t *testing.T) {
	t.Parallel() // the cluster targets start at once instead of after it
	cfg := runSettings(t)
	for r := range cfg.repeat {
		t.Run(fmt.Sprintf("none/%d", r), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cfg.duration+2*time.Minute)
			defer cancel()
			sh := embeddedShop(t, ctx)
			w := newWorkload(sh, runName("s"), cfg.seed+uint64(r), cfg.duration)
			if err := w.setup(ctx); err != nil {
				t.Fatal(err)
			}
			tctx, stop := context.WithTimeout(ctx, cfg.duration)
			w.traffic(tctx)
			stop()
			report(t, "none", w.verify(t, ctx), 0)
		})
	}
}

// embeddedShop opens a shop on a fresh embedded store, closed when t ends.
func embeddedShop(t *testing.T, ctx context.Context) *shop.Shop {
	t.Helper()
	sh, err := shop.Open(ctx, shop.Config{Placement: placement.Embedded(),
		Backends: placement.Options{SQLitePath: filepath.Join(t.TempDir(), "shop.db")}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	return sh
}

// report logs what a run checked, with the machine's load next to it.
func report(t *testing.T, nemesis string, s summary, faults int) {
	t.Helper()
	t.Logf("nemesis %s, faults %d: %d histories (keys), %d operations (%d unknown); %d reads checked against a 5 s staleness budget; orders %d acknowledged, %d refused, %d unknown (%d of them stored after the heal); %d acknowledged cart lines; load %s",
		nemesis, faults, s.keys, s.ops, s.unknown, s.stale, s.acked, s.refused, s.unknownOrders, s.unknownApplied, s.cartAcked, loadavg())
	if s.ops == 0 {
		t.Error("no operation recorded: the workload did not run")
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// healOnce makes heal (nil: nothing to undo) run once however often it is called, and calls
// it in t.Cleanup too, so that a failing test leaves no frozen process, dead server or
// iptables rule behind. Every target's nemeses heal through it; the cleanup's bound is the
// slowest heal, a Cassandra node's restart.
func healOnce(t *testing.T, name string, heal func(context.Context) error) func(context.Context) error {
	var once sync.Once
	var err error
	h := func(ctx context.Context) error {
		once.Do(func() {
			if heal != nil {
				err = heal(ctx)
			}
		})
		return err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cassBootTimeout)
		defer cancel()
		if err := h(ctx); err != nil {
			t.Errorf("heal %s: %v", name, err)
		}
	})
	return h
}

// wait sleeps d or until ctx ends.
func wait(ctx context.Context, d time.Duration) error { return serverproc.Sleep(ctx, d) }
