package robustness

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/shardmart/shardmart/internal/order"
)

// cartEditOp sets a product's quantity in the cart (qty 0 removes the line).
type cartEditOp struct {
	product string
	qty     int64
}

// checkoutOp places an order from the cart under an Idempotency-Key. Its answer is the
// order's lines (renderLines), a refusal (the cart was empty), or notPlaced: a checkout whose
// answer was lost and whose key holds no order once the store is healthy again.
type checkoutOp struct{ key string }

const notPlaced = "(no order)"

// renderLines renders a cart or an order as its lines, "product=qty" sorted by product: the
// model's state and a checkout's answer.
func renderLines(lines map[string]int64) string {
	keys := slices.Sorted(maps.Keys(lines))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+strconv.FormatInt(lines[k], 10))
	}
	return strings.Join(parts, ",")
}

// orderLines is an order's lines as renderLines renders them.
func orderLines(items []order.Item) string {
	m := map[string]int64{}
	for _, it := range items {
		m[it.ProductID] += it.Quantity
	}
	return renderLines(m)
}

// applyEdit is the cart state after e.
func applyEdit(state string, e cartEditOp) string {
	m := map[string]int64{}
	if state != "" {
		for _, l := range strings.Split(state, ",") {
			p, q, _ := strings.Cut(l, "=")
			m[p], _ = strconv.ParseInt(q, 10, 64)
		}
	}
	if e.qty == 0 {
		delete(m, e.product)
	} else {
		m[e.product] = e.qty
	}
	return renderLines(m)
}

// checkoutModel is one client's cart from its first edit to its checkout: the order must
// hold exactly the cart as the client's acknowledged edits left it. An edit whose outcome is
// unknown may have landed at any moment from its call on, or never; a checkout leaves an
// empty cart behind (the next edit starts a new cart).
func checkoutModel() porcupine.Model {
	m := porcupine.NondeterministicModel{
		Init: func() []any { return []any{""} },
		Step: func(state, in, out any) []any {
			s, r := state.(string), out.(result)
			switch o := in.(type) {
			case cartEditOp:
				next := applyEdit(s, o)
				switch {
				case r.unknown:
					return []any{s, next}
				case r.refused:
					return []any{s}
				}
				return []any{next}
			case checkoutOp:
				switch {
				case r.unknown && s != "":
					return []any{s, ""}
				case r.unknown, r.value == notPlaced:
					return []any{s}
				case r.refused: // "cart is empty": right only if it was
					if s == "" {
						return []any{s}
					}
				case s != "" && r.value == s:
					return []any{""}
				}
			}
			return nil
		},
		DescribeOperation: func(in, out any) string { return describeInput(in) + " → " + out.(result).String() },
		DescribeState: func(state any) string {
			if state == "" {
				return "(empty cart)"
			}
			return fmt.Sprint(state)
		},
	}
	return m.ToModel()
}
