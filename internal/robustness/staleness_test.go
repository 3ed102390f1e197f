package robustness

import (
	"fmt"
	"testing"
	"time"
)

// written is one write of a register whose every write stores a value no other write stores
// (prices are never reused; an order reaches each status at most once).
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
// It reports a read only when the history proves it wrong — a value never written before the
// read returned, or one that a later write (begun after it was acknowledged) had replaced more
// than budget before the read began — so an unknown write never makes a false alarm.
func stale(initial any, writes []written, reads []op, budget time.Duration) []error {
	var errs []error
	for _, r := range reads {
		if r.unknown {
			continue
		}
		v := r.out.(result).value
		var src *written // nil: the initial value
		if v != initial {
			for i := range writes {
				if writes[i].value == v {
					src = &writes[i]
				}
			}
			if src == nil || src.call.After(r.ret) {
				errs = append(errs, fmt.Errorf("read (%s) answered %v, a value never written before the read returned",
					r.call.Format("15:04:05.000"), v))
				continue
			}
		}
		for _, w := range writes {
			definitelyAfter := src == nil || (!src.ret.IsZero() && w.call.After(src.ret))
			if w.value != v && definitelyAfter && !w.ret.IsZero() && w.ret.Before(r.call.Add(-budget)) {
				errs = append(errs, fmt.Errorf("read (%s) answered %v, which %v had replaced %s before the read began (budget %s)",
					r.call.Format("15:04:05.000"), v, w.value, r.call.Sub(w.ret).Round(time.Millisecond), budget))
				break
			}
		}
	}
	return errs
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
}
