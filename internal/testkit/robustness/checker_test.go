package robustness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/shardmart/shardmart/internal/order"
)

// at builds a known operation of client c from a to b (milliseconds after t0).
func at(t0 time.Time, c int, a, b int, in any, out result) op {
	return op{client: c, key: "k", in: in, out: out, call: t0.Add(time.Duration(a) * time.Millisecond), ret: t0.Add(time.Duration(b) * time.Millisecond)}
}

func unknownAt(t0 time.Time, c int, a int, in any) op {
	return op{client: c, key: "k", in: in, out: result{unknown: true}, call: t0.Add(time.Duration(a) * time.Millisecond), unknown: true}
}

// The checker tells a linearizable stock history from one that is not, and lets an unknown
// order count as taken or not, but never as taken twice.
func TestStockChecker(t *testing.T) {
	t0 := time.Now()
	read := func(c, a, b int, v int64) op { return at(t0, c, a, b, stockOp{read: true}, result{value: v}) }
	cases := []struct {
		name string
		ops  []op
		want porcupine.CheckResult
	}{
		{"sequential", []op{
			at(t0, 0, 0, 10, stockOp{qty: 2}, result{}), read(1, 20, 30, 3),
			at(t0, 0, 40, 50, stockOp{qty: 4}, result{refused: true}), read(1, 60, 70, 3),
		}, porcupine.Ok},
		{"a read misses an acknowledged order", []op{
			at(t0, 0, 0, 10, stockOp{qty: 2}, result{}), read(1, 20, 30, 5),
		}, porcupine.Illegal},
		{"a refused order took stock", []op{
			at(t0, 0, 0, 10, stockOp{qty: 4}, result{refused: true}), read(1, 20, 30, 1),
		}, porcupine.Illegal},
		{"an order refused while stock sufficed", []op{
			read(1, 0, 5, 5), at(t0, 0, 10, 20, stockOp{qty: 4}, result{refused: true}),
		}, porcupine.Illegal},
		{"an unknown order seen to apply later", []op{
			unknownAt(t0, 0, 0, stockOp{qty: 2}), read(1, 10, 20, 5), read(1, 30, 40, 3), read(1, 50, 60, 3),
		}, porcupine.Ok},
		{"an unknown order undone", []op{
			unknownAt(t0, 0, 0, stockOp{qty: 2}), read(1, 10, 20, 3), read(1, 30, 40, 5),
		}, porcupine.Illegal},
		{"an unknown order counted twice", []op{
			unknownAt(t0, 0, 0, stockOp{qty: 2}), read(1, 10, 20, 1),
		}, porcupine.Illegal},
		{"below zero", []op{read(1, 0, 10, -1)}, porcupine.Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := check(stockModel(5), "k", c.ops, t0, 10*time.Second)
			if v.result != c.want {
				t.Fatalf("got %s, want %s", v.result, c.want)
			}
			if (v.err() == nil) != (c.want == porcupine.Ok) {
				t.Fatalf("err %v for result %s", v.err(), v.result)
			}
		})
	}
}

func TestStatusChecker(t *testing.T) {
	t0 := time.Now()
	read := func(c, a, b int, s order.Status) op { return at(t0, c, a, b, statusOp{}, result{value: s}) }
	to := func(c, a, b int, s order.Status, refused bool) op {
		return at(t0, c, a, b, statusOp{to: s}, result{refused: refused})
	}
	cases := []struct {
		name string
		ops  []op
		want porcupine.CheckResult
	}{
		{"paid then shipped", []op{to(0, 0, 10, order.Paid, false), read(1, 20, 30, order.Paid),
			to(0, 40, 50, order.Shipped, false), to(1, 60, 70, order.Paid, true), read(1, 80, 90, order.Shipped)}, porcupine.Ok},
		{"paid read as created after the acknowledgement", []op{to(0, 0, 10, order.Paid, false), read(1, 20, 30, order.Created)}, porcupine.Illegal},
		{"an illegal transition applied", []op{to(0, 0, 10, order.Shipped, false)}, porcupine.Illegal},
		{"shipping refused while a payment is in flight", []op{to(0, 0, 50, order.Paid, false), to(1, 10, 40, order.Shipped, true),
			read(2, 60, 70, order.Paid)}, porcupine.Ok},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if v := check(statusModel(), "k", c.ops, t0, 10*time.Second); v.result != c.want {
				t.Fatalf("got %s, want %s", v.result, c.want)
			}
		})
	}
}

func TestRegisterChecker(t *testing.T) {
	t0 := time.Now()
	read := func(a, b int, v int64) op { return at(t0, 1, a, b, priceOp{read: true}, result{value: v}) }
	set := func(a, b int, v int64) op { return at(t0, 0, a, b, priceOp{price: v}, result{}) }
	if v := check(registerModel(100), "k", []op{set(0, 10, 200), read(20, 30, 200), set(40, 50, 300), read(60, 70, 300)}, t0, 10*time.Second); v.result != porcupine.Ok {
		t.Errorf("sequential sets and reads: got %s", v.result)
	}
	// A stale read: the price set and acknowledged before the read began is not the one read.
	v := check(registerModel(100), "k", []op{set(0, 10, 200), read(20, 30, 100)}, t0, 10*time.Second)
	if v.result != porcupine.Illegal {
		t.Fatalf("stale read: got %s, want Illegal", v.result)
	}
	// The visualisation of a failing history is written and names the operations.
	path := filepath.Join(t.TempDir(), "stale.html")
	if err := porcupine.VisualizePath(registerModel(100), v.info, path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "set 200") {
		t.Errorf("visualisation does not show the operation \"set 200\"")
	}
}

// A check that runs out of time is reported as such and is not a pass.
func TestCheckerTimeoutIsNotAPass(t *testing.T) {
	t0 := time.Now()
	// Many concurrent unknown orders and reads, then a read no order can explain: the checker
	// can only call it Illegal after trying every order of the others, which it cannot do in a
	// microsecond.
	var ops []op
	for i := range 60 {
		ops = append(ops, unknownAt(t0, i, i, stockOp{qty: 1}))
		ops = append(ops, at(t0, 100+i, i, 1000, stockOp{read: true}, result{value: int64(1000 - i)}))
	}
	ops = append(ops, at(t0, 200, 2000, 2001, stockOp{read: true}, result{value: int64(2000)}))
	v := check(stockModel(1000), "k", ops, t0, time.Microsecond)
	if v.result != porcupine.Unknown {
		t.Fatalf("got %s within a microsecond, want Unknown (the checker timed out)", v.result)
	}
	err := v.err()
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err %v, want a timeout reported as a failure", err)
	}
}

func TestRecorderBoundsEachKey(t *testing.T) {
	r := newRecorder(3)
	for i := range 4 {
		if got, want := r.reserve("a"), i < 2; got != want {
			t.Fatalf("reserve %d on a: got %v, want %v", i, got, want)
		}
	}
	if !r.full([]string{"a"}) || r.full([]string{"a", "b"}) {
		t.Fatal("full: a is full for the clients, b is not")
	}
	if !r.reserveLast("a") || r.reserveLast("a") {
		t.Fatal("the final read gets exactly the last slot")
	}
	if !r.reserve("b") {
		t.Fatal("a full key blocks another key")
	}
}

// TestEffectCheck: a run in which the nemesis changed nothing for the clients, or in which a
// phase had no acknowledged write or order, fails.
func TestEffectCheck(t *testing.T) {
	t0 := time.Now()
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	f := fault{from: ms(1000), to: ms(2000)}
	w := &workload{stock: newRecorder(10), status: newRecorder(10), price: newRecorder(10), pricePage: newRecorder(10), statusPage: newRecorder(10)}
	order := func(a int, out result) {
		o := op{key: "stock/p", in: stockOp{qty: 1}, call: ms(a), ret: ms(a + 10), out: out, unknown: out.unknown}
		w.stock.add(o)
	}
	order(500, result{})
	order(1500, result{})
	order(1600, result{refused: true})
	order(2500, result{})
	w.stock.add(op{client: -1, key: "stock/p", in: stockOp{read: true}, call: ms(1200), ret: ms(1210), unknown: true, out: result{unknown: true}})
	p := w.phases(f)
	want := [3]phase{{acked: 1, orders: 1}, {acked: 1, orders: 1}, {acked: 1, orders: 1}}
	if p != want {
		t.Fatalf("phases %+v, want %+v (final reads and refusals left out)", p, want)
	}
	kill := nemesis{name: "kill", disrupts: true}
	if errs := effectErrors(kill, p); len(errs) != 1 {
		t.Fatalf("a kill no client noticed: %v, want exactly the no-effect error", errs)
	}
	if errs := effectErrors(nemesis{name: "stepdown"}, p); len(errs) != 0 {
		t.Fatalf("a clean stepdown: %v", errs)
	}
	w.failures = append(w.failures, ms(1100))
	order(1700, result{unknown: true})
	if p := w.phases(f); p[1].failed != 2 || len(effectErrors(kill, p)) != 0 {
		t.Fatalf("a kill seen by two clients: phases %+v, errors %v", p, effectErrors(kill, p))
	}
	if errs := effectErrors(kill, [3]phase{{acked: 1, orders: 1}, {acked: 1, orders: 1, stalled: 1}, {acked: 1, orders: 1}}); len(errs) != 0 {
		t.Fatalf("a kill that stalled a client: %v", errs)
	}
	w2 := &workload{stock: newRecorder(10), status: newRecorder(10), price: newRecorder(10), pricePage: newRecorder(10), statusPage: newRecorder(10)}
	w2.price.add(op{key: "price/p", in: priceOp{read: true}, call: ms(300), ret: ms(300).Add(stall), out: result{value: int64(1)}})
	if p := w2.phases(f); p[1].stalled != 1 || p[1].acked != 0 {
		t.Fatalf("a read answered %s late during the fault: phases %+v, want one stall and no write", stall, p)
	}
	if errs := effectErrors(kill, [3]phase{{acked: 1, orders: 1}, {failed: 1}, {acked: 1}}); len(errs) != 2 {
		t.Fatalf("no write during the fault, no order after it: %v, want 2 errors", errs)
	}
}
