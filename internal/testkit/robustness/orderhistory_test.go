package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/paging"
)

// historyBudget is RPL-1's budget for the order history (ORD-2), the read table's only 10 s one.
const historyBudget = 10 * time.Second

// historyReader reads the order history of the users whose orders the status clients move, as
// the API's history page does: each such user has one order, whose entry shows its status as
// the projector last wrote it. No entry reads as "" (the entry is not there).
func (w *workload) historyReader(ctx context.Context, c int, rng *rand.Rand) {
	for ctx.Err() == nil {
		i := rng.IntN(len(w.statusIDs))
		id := w.statusIDs[i]
		if _, ok := timed(ctx, w.historyPage, c, "status/"+id, statusOp{}, func(ctx context.Context) (any, error) {
			pg, err := w.sh.Stores.History.ListHistory(ctx, statusUser(w.run, i), paging.Request{})
			if err != nil {
				return nil, err
			}
			for _, e := range pg.Items {
				if e.OrderID == id {
					return e.Status, nil
				}
			}
			return order.Status(""), nil
		}, unknownUnlessRefused()); !ok && allFull(w.historyPage, "status/", w.statusIDs) {
			return
		}
		w.pause(ctx, rng)
	}
}

// statusUser is the user who placed the i-th order the status clients move.
func statusUser(run string, i int) string { return fmt.Sprintf("status-%s-%d", run, i) }

// checkHistory checks every history read against the 10 s budget. The history starts without
// the entry ("") and setup's order placed it as "created" before traffic began (both times
// taken as traffic's start); the status moves after that are the ones the status clients
// recorded (acknowledged or unknown).
func (w *workload) checkHistory(t *testing.T) int {
	t.Helper()
	placed := []written{{value: order.Created, call: w.from, ret: w.from}}
	n := checkStaleWithin(t, "history", w.status, w.historyPage, order.Status(""), func(in any) (any, bool) {
		o := in.(statusOp)
		return o.to, o.to != ""
	}, placed, historyBudget)
	t.Logf("%d order-history reads checked against the %s budget", n, historyBudget)
	return n
}

// historyReadsLagging counts the history reads of the clients (not the final reads) that
// began at least historyBudget after the lag began at from and were answered before the heal
// began at healing: reads answered while the victim lagged past the budget. A read begun
// earlier, or answered once the heal had begun, proves nothing about the budget.
func (w *workload) historyReadsLagging(from, healing time.Time) int {
	return answeredWithin(w.historyPage, from.Add(historyBudget), healing)
}

// The history check as checkHistory composes it: no entry is fine until the 10 s budget after
// setup placed the order, an entry behind a status move is fine for 10 s after the move.
func TestHistoryStalenessCheck(t *testing.T) {
	t0 := time.Now()
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	writes := []written{{value: order.Created, call: t0, ret: t0}, {value: order.Paid, call: ms(1000), ret: ms(1010)}}
	cases := []struct {
		name  string
		at    int
		value order.Status
		stale bool
	}{
		{"no entry yet, within the budget", 9000, "", false},
		{"no entry, past the budget", 10500, "", true},
		{"created behind paid, within the budget", 10900, order.Created, false},
		{"created behind paid, past the budget", 11100, order.Created, true},
		{"paid", 30000, order.Paid, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := op{call: ms(c.at), ret: ms(c.at + 10), out: result{value: c.value}}
			if got := len(stale(order.Status(""), writes, []op{r}, historyBudget)) > 0; got != c.stale {
				t.Fatalf("stale %v, want %v", got, c.stale)
			}
		})
	}
}
