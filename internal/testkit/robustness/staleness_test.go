package robustness

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// written is one write of a register whose writes store distinct values (prices are never
// reused; an order reaches each status at most once), apart from attempts that cannot have
// taken effect twice (an unknown transition to a status already reached).
type written struct {
	value     any
	call, ret time.Time // ret is zero for a write whose outcome is unknown
}

// writesOf picks the writes that may have taken effect (acknowledged or unknown) out of a
// key's history; value says what an operation writes, if it is a write.
func writesOf(ops []op, value func(in any) (any, bool)) []written {
	var out []written
	for _, o := range ops {
		v, ok := value(o.in)
		if !ok || o.out.(result).refused {
			continue
		}
		w := written{value: v, call: o.call}
		if !o.unknown {
			w.ret = o.ret
		}
		out = append(out, w)
	}
	return out
}

// stale checks reads allowed to lag by budget (RPL-1's 5 s and 10 s): each value read must have
// been the register's value at some moment from budget before the read began to its return.
// It reports a read only when the history proves it wrong — a value no write had begun to
// store before the read returned, or one that writes begun after each of its own were
// acknowledged had replaced more than budget before the read began — so an unknown write
// never makes a false alarm.
func stale(initial any, writes []written, reads []op, budget time.Duration) []error {
	var errs []error
	for _, r := range reads {
		if r.unknown {
			continue
		}
		v := r.out.(result).value
		// The writes that may have stored v before the read returned; the initial value is
		// one written before everything (zero times).
		var sources []written
		if v == initial {
			sources = append(sources, written{value: v, ret: time.Time{}.Add(time.Nanosecond)})
		}
		for _, w := range writes {
			if w.value == v && !w.call.After(r.ret) {
				sources = append(sources, w)
			}
		}
		if len(sources) == 0 {
			errs = append(errs, fmt.Errorf("read (%s) answered %v, a value no write had begun to store before the read returned",
				r.call.Format("15:04:05.000"), v))
			continue
		}
		var replaced error
		for _, src := range sources {
			replaced = replacedBefore(src, writes, r, budget)
			if replaced == nil {
				break
			}
		}
		if replaced != nil {
			errs = append(errs, replaced)
		}
	}
	return errs
}

// replacedBefore says which write, begun after src was acknowledged, had replaced src's value
// more than budget before read r began; nil if none did.
func replacedBefore(src written, writes []written, r op, budget time.Duration) error {
	if src.ret.IsZero() { // unknown: it may have applied at any later moment
		return nil
	}
	for _, w := range writes {
		if w.value != src.value && w.call.After(src.ret) && !w.ret.IsZero() && w.ret.Before(r.call.Add(-budget)) {
			return fmt.Errorf("read (%s) answered %v, which %v had replaced %s before the read began (budget %s)",
				r.call.Format("15:04:05.000"), src.value, w.value, r.call.Sub(w.ret).Round(time.Millisecond), budget)
		}
	}
	return nil
}

func TestStalenessChecker(t *testing.T) {
	t0 := time.Now()
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	writes := []written{{value: int64(2), call: ms(0), ret: ms(10)}, {value: int64(3), call: ms(6000), ret: ms(6010)}}
	read := func(a, b int, v int64) op {
		return op{call: ms(a), ret: ms(b), out: result{value: v}}
	}
	cases := []struct {
		name  string
		read  op
		stale bool
	}{
		{"current", read(7000, 7010, 3), false},
		{"old value within the budget", read(7000, 7010, 2), false},
		{"initial value within the budget", read(4000, 4010, 1), false},
		{"initial value past the budget", read(5100, 5110, 1), true},
		{"old value past the budget", read(11100, 11110, 2), true},
		{"a value from the future", read(5000, 5010, 3), true},
		{"a value never written", read(7000, 7010, 9), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := stale(int64(1), writes, []op{c.read}, 5*time.Second)
			if got := len(errs) > 0; got != c.stale {
				t.Fatalf("stale %v (%v), want %v", got, errs, c.stale)
			}
		})
	}
	// An unknown write may have applied at any time from its call: its value read late is fine,
	// and it never counts as having replaced another.
	unknown := []written{{value: int64(2), call: ms(0)}}
	if errs := stale(int64(1), unknown, []op{read(9000, 9010, 2), read(9000, 9010, 1)}, 5*time.Second); len(errs) > 0 {
		t.Fatalf("unknown write: %v", errs)
	}
	// A second, unknown attempt to store a value already stored (a retried transition) does
	// not make reads of it before that attempt look like reads of the future.
	again := append(slices.Clone(writes), written{value: int64(2), call: ms(8000)})
	if errs := stale(int64(1), again, []op{read(5000, 5010, 2)}, 5*time.Second); len(errs) > 0 {
		t.Fatalf("a repeated value: %v", errs)
	}
}

// TestCheckStaleCountsKnownReads: an unknown read is not checked, so it is not counted as one.
func TestCheckStaleCountsKnownReads(t *testing.T) {
	t0 := time.Now()
	strong, page := newRecorder(10), newRecorder(10)
	page.add(op{key: "price/p", in: priceOp{read: true}, call: t0, ret: t0.Add(time.Millisecond), out: result{value: int64(1)}})
	page.add(op{key: "price/p", in: priceOp{read: true}, call: t0, unknown: true, out: result{unknown: true}})
	if n := checkStale(t, "price", strong, page, int64(1), func(in any) (any, bool) { o := in.(priceOp); return o.price, !o.read }); n != 1 {
		t.Fatalf("%d reads counted, want the 1 known", n)
	}
}
