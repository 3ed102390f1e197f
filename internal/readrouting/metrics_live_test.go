package readrouting_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/readrouting"
	smongo "github.com/shardmart/shardmart/internal/store/mongostore"
)

// TestMetricsFollowAFrozenSecondary runs a store as serve does (its metrics on a registry, the
// lag monitor on the set, here every 250 ms and the oplog window every 500 ms) on the real
// 3-member set, and reads the routing through the metrics alone:
//
//   - healthy: 5 s-budget reads (product page) count as secondary; every member's lag gauge
//     is under the budget; the set's oplog window gauge is positive and grows as the set writes;
//   - one secondary frozen (SIGSTOP): its lag gauge grows past the budget and keeps growing
//     while the other secondary's stays under it, and every budgeted read counts as
//     primary_no_fresh_member, none as secondary, although one secondary is fresh (a driver
//     may pick either, so the worst decides); stock reads count as primary_by_rule throughout;
//   - after SIGCONT: its lag gauge falls back under the budget and the reads count as
//     secondary again.
func TestMetricsFollowAFrozenSecondary(t *testing.T) {
	set := readrouting.LiveSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	reg := prometheus.NewPedanticRegistry()
	s, err := smongo.Open(ctx, smongo.Options{URI: set.URI(), Database: fmt.Sprintf("routing_metrics_%d", time.Now().UnixNano()), Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Database().Drop(dctx)
		_ = s.Close()
	})
	if err := s.WatchLagWith(ctx, set.URI(), smongo.LagOptions{Interval: 250 * time.Millisecond, Oplog: 500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	seedProduct(t, ctx, s)
	g := gatherer{t: t, reg: reg}
	page := func() {
		rctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		// A read the driver sent to the frozen member before the policy reacted times out.
		if _, err := s.Products().GetProduct(rctx, "p1"); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("product page: %v", err)
		}
	}
	pageReads := func(outcome string) float64 {
		return g.sum(readrouting.MetricReads, map[string]string{"op": string(readrouting.OpProductPage), "budget_seconds": "5", "outcome": outcome})
	}

	primary := set.Primary(ctx)
	if primary < 0 {
		t.Fatal("no primary")
	}
	hosts := set.Hosts()
	x, other := hosts[(primary+1)%3], hosts[(primary+2)%3]
	lagOf := func(host string) float64 {
		v, ok := g.value(readrouting.MetricMemberLag, map[string]string{"set": set.Name(), "member": host})
		if !ok {
			t.Fatalf("no %s for %s", readrouting.MetricMemberLag, host)
		}
		return v
	}

	// Healthy.
	eventually.True(t, 30*time.Second, "a product page read counted as secondary", func() bool {
		page()
		return pageReads(readrouting.OutcomeSecondary) > 0
	})
	for _, h := range hosts {
		if l := lagOf(h); l >= budget.Seconds() {
			t.Errorf("healthy: lag gauge of %s is %.3f s, want < the %s budget", h, l, budget)
		}
	}
	window := func() float64 {
		v, _ := g.value(readrouting.MetricOplogWindow, map[string]string{"set": set.Name()})
		return v
	}
	var w0 float64
	eventually.True(t, 10*time.Second, "a positive oplog window", func() bool { w0 = window(); return w0 > 0 })
	if _, err := s.Database().Collection("writes").InsertOne(ctx, bson.D{{Key: "at", Value: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	var w1 float64
	eventually.True(t, 10*time.Second, "the oplog window to grow after a write", func() bool { w1 = window(); return w1 > w0 })
	t.Logf("healthy: oplog window of %s %.0f s, then %.0f s after a write", set.Name(), w0, w1)
	carts := func() float64 {
		return g.sum(readrouting.MetricReads, map[string]string{"op": string(readrouting.OpCart), "budget_seconds": "0", "outcome": readrouting.OutcomePrimaryByRule})
	}
	cartRead := func() {
		if _, err := s.Carts().ActiveCart(ctx, cart.Owner{SessionID: "s1"}, time.Now()); err != nil && !errors.Is(err, cart.ErrNotFound) {
			t.Errorf("cart read: %v", err)
		}
	}
	carts0 := carts()
	cartRead()

	// One secondary frozen.
	t.Cleanup(func() { _ = set.Resume((primary + 1) % 3) })
	if err := set.Pause((primary + 1) % 3); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	var lagPast float64
	eventually.True(t, 30*time.Second, "the frozen member's lag gauge past the 5 s budget", func() bool {
		page()
		lagPast = lagOf(x)
		return lagPast > budget.Seconds()
	})
	sec, fallback := pageReads(readrouting.OutcomeSecondary), pageReads(readrouting.OutcomePrimaryNoFreshMember)
	var reads int
	var lagLater float64
	eventually.True(t, 10*time.Second, "the frozen member's lag gauge to keep growing", func() bool {
		page()
		reads++
		lagLater = lagOf(x)
		return lagLater >= lagPast+1
	})
	cartRead()
	if got := pageReads(readrouting.OutcomeSecondary); got != sec {
		t.Errorf("frozen: %v budgeted reads counted as secondary while %s lags past %.1f s", got-sec, x, lagPast)
	}
	if got := pageReads(readrouting.OutcomePrimaryNoFreshMember); got != fallback+float64(reads) {
		t.Errorf("frozen: primary_no_fresh_member went from %v to %v over %d reads, want +%d", fallback, got, reads, reads)
	}
	if l := lagOf(other); l >= budget.Seconds() {
		t.Errorf("frozen: lag gauge of the running secondary %s is %.3f s, want < the %s budget", other, l, budget)
	}
	t.Logf("frozen %s: lag gauge %.1f s then %.1f s (%s after SIGSTOP); running %s %.3f s; budgeted reads on the primary (%v primary_no_fresh_member)",
		x, lagPast, lagLater, time.Since(frozenAt).Round(time.Millisecond), other, lagOf(other), pageReads(readrouting.OutcomePrimaryNoFreshMember))

	// Resumed.
	if err := set.Resume((primary + 1) % 3); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	sec = pageReads(readrouting.OutcomeSecondary)
	eventually.True(t, 45*time.Second, "budgeted reads counted as secondary again after SIGCONT", func() bool {
		page()
		return pageReads(readrouting.OutcomeSecondary) > sec
	})
	if l := lagOf(x); l > budget.Seconds() {
		t.Errorf("resumed: reads back on secondaries while the lag gauge of %s says %.3f s", x, l)
	}
	t.Logf("resumed: reads on secondaries again %s after SIGCONT, lag gauge of %s %.3f s",
		time.Since(resumedAt).Round(time.Millisecond), x, lagOf(x))
	if got := carts() - carts0; got != 2 {
		t.Errorf("cart reads counted primary_by_rule: +%v, want +2 (one healthy, one frozen)", got)
	}
}

// gatherer reads values off a registry.
type gatherer struct {
	t   *testing.T
	reg prometheus.Gatherer
}

// sum adds every series of name whose labels include want.
func (g gatherer) sum(name string, want map[string]string) float64 {
	total, _ := g.find(name, want)
	return total
}

// value is the one series of name with labels want (false when there is none).
func (g gatherer) value(name string, want map[string]string) (float64, bool) {
	v, n := g.find(name, want)
	return v, n == 1
}

func (g gatherer) find(name string, want map[string]string) (total float64, n int) {
	g.t.Helper()
	mfs, err := g.reg.Gather()
	if err != nil {
		g.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue series
				}
			}
			n++
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total, n
}
