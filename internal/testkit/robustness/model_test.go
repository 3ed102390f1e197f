package robustness

import (
	"fmt"

	"github.com/anishathalye/porcupine"

	"github.com/shardmart/shardmart/internal/order"
)

// result is what a client was told: a value read, a refusal (the operation certainly did not
// take effect), or nothing known.
type result struct {
	value   any // what a read returned; nil for a write
	refused bool
	unknown bool
}

func (r result) String() string {
	if o := r.outcome(); o != outcomeAcked || r.value == nil {
		return o.String()
	}
	return fmt.Sprint(r.value)
}

// outcome is what a client was told, named alike on every target: the operation was
// acknowledged, refused (certainly not applied) or has an unknown outcome.
type outcome int

const (
	outcomeAcked outcome = iota
	outcomeRefused
	outcomeUnknown
)

func (o outcome) String() string { return [...]string{"acknowledged", "refused", "unknown"}[o] }

func (r result) outcome() outcome {
	switch {
	case r.unknown:
		return outcomeUnknown
	case r.refused:
		return outcomeRefused
	}
	return outcomeAcked
}

// describeInput names an operation's input in a text history.
func describeInput(in any) string {
	switch o := in.(type) {
	case stockOp:
		if o.read {
			return "read stock"
		}
		return fmt.Sprintf("order %d", o.qty)
	case statusOp:
		if o.to == "" {
			return "read status"
		}
		return "to " + string(o.to)
	case priceOp:
		if o.read {
			return "read price"
		}
		return fmt.Sprintf("set price %d", o.price)
	case cartEditOp:
		if o.qty == 0 {
			return "remove " + o.product
		}
		return fmt.Sprintf("put %s=%d", o.product, o.qty)
	case checkoutOp:
		return "checkout " + o.key
	case sessionOp:
		if o.caller != "" {
			return "login from session " + o.caller
		}
		return "start session"
	case historyOp:
		return "history entry " + o.order
	}
	return fmt.Sprint(in)
}

// spec is a sequential specification: what in does to state, and what it answers.
type spec func(state, in any) (next any, answer result)

// linearizable turns a deterministic spec into porcupine's model. A known answer must equal
// the spec's; an unknown one allows both that the operation took effect and that it did not
// (a refusal never takes effect).
func linearizable(init any, apply spec, describe func(in any) string) porcupine.Model {
	m := porcupine.NondeterministicModel{
		Init: func() []any { return []any{init} },
		Step: func(state, in, out any) []any {
			next, want := apply(state, in)
			got := out.(result)
			switch {
			case got.unknown && want.refused:
				return []any{state}
			case got.unknown:
				return []any{state, next}
			case got.refused == want.refused && got.value == want.value:
				return []any{next}
			}
			return nil
		},
		DescribeOperation: func(in, out any) string { return describe(in) + " → " + out.(result).String() },
		DescribeState:     func(state any) string { return fmt.Sprint(state) },
	}
	return m.ToModel()
}

// stockOp is an order of qty units of one product (in one zone), or a read of its stock.
type stockOp struct {
	read bool
	qty  int64
}

// stockModel is the stock counter of one product: an order takes qty units or is refused
// because fewer are left; a read returns what is left. Stock never goes below zero.
func stockModel(initial int64) porcupine.Model {
	return linearizable(initial, func(state, in any) (any, result) {
		s, o := state.(int64), in.(stockOp)
		switch {
		case o.read:
			return s, result{value: s}
		case s < o.qty:
			return s, result{refused: true}
		}
		return s - o.qty, result{}
	}, func(in any) string {
		if o := in.(stockOp); !o.read {
			return fmt.Sprintf("order %d", o.qty)
		}
		return "read"
	})
}

// statusOp moves an order to a status, or reads its status ("" to).
type statusOp struct{ to order.Status }

// statusModel is an order's status under the domain's state machine (order.CanTransition):
// an illegal transition is refused and changes nothing.
func statusModel() porcupine.Model {
	return linearizable(order.Created, func(state, in any) (any, result) {
		s, o := state.(order.Status), in.(statusOp)
		switch {
		case o.to == "":
			return s, result{value: s}
		case !order.CanTransition(s, o.to):
			return s, result{refused: true}
		}
		return o.to, result{}
	}, func(in any) string {
		if to := in.(statusOp).to; to != "" {
			return "→ " + string(to)
		}
		return "read"
	})
}

// priceOp sets a product's price (in minor units), or reads it (read true).
type priceOp struct {
	read  bool
	price int64
}

// registerModel is a register of int64 values (a product's price).
func registerModel(initial int64) porcupine.Model {
	return linearizable(initial, func(state, in any) (any, result) {
		if o := in.(priceOp); !o.read {
			return o.price, result{}
		}
		return state, result{value: state}
	}, func(in any) string {
		if o := in.(priceOp); !o.read {
			return fmt.Sprintf("set %d", o.price)
		}
		return "read"
	})
}
