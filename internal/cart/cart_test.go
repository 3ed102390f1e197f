package cart

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func lines(pairs ...any) []Item {
	var out []Item
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, Item{ProductID: pairs[i].(string), Category: "c", Quantity: int64(pairs[i+1].(int))})
	}
	return out
}

func fullCart(n int) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i] = Item{ProductID: fmt.Sprintf("u%03d", i), Category: "c", Quantity: 1}
	}
	return out
}

func TestMergeLines(t *testing.T) {
	full := fullCart(MaxItems)
	almost := fullCart(MaxItems - 1)
	for _, tc := range []struct {
		name            string
		user, guest     []Item
		want, notMerged []Item
	}{
		{"guest only", nil, lines("a", 2), lines("a", 2), nil},
		{"quantities add", lines("a", 2, "b", 1), lines("b", 3, "c", 1), lines("a", 2, "b", 4, "c", 1), nil},
		{"sum clamped, the excess reported", lines("a", 998), lines("a", 5), lines("a", 999), lines("a", 4)},
		{"full cart: new lines reported, known lines still add", full, lines("x", 1, "u000", 2, "y", 3),
			append(append([]Item{}, Item{ProductID: "u000", Category: "c", Quantity: 3}), full[1:]...), lines("x", 1, "y", 3)},
		{"one slot left: the first new line takes it, the rest reported", almost, lines("x", 1, "y", 2),
			append(append([]Item{}, almost...), lines("x", 1)...), lines("y", 2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]Item(nil), tc.user...)
			got, notMerged := MergeLines(tc.user, tc.guest)
			if !sameLines(got, tc.want) {
				t.Errorf("merged: got %v, want %v", got, tc.want)
			}
			if !reflect.DeepEqual(notMerged, tc.notMerged) {
				t.Errorf("not merged: got %v, want %v", notMerged, tc.notMerged)
			}
			if !reflect.DeepEqual(before, tc.user) {
				t.Error("MergeLines modified its input")
			}
		})
	}
}

// sameLines compares quantities per product (order of the user's lines is kept; new lines follow).
func sameLines(a, b []Item) bool {
	if len(a) != len(b) {
		return false
	}
	want := map[string]int64{}
	for _, it := range b {
		want[it.ProductID] = it.Quantity
	}
	for _, it := range a {
		if q, ok := want[it.ProductID]; !ok || q != it.Quantity {
			return false
		}
	}
	return true
}

func TestEditable(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	if err := (Cart{ID: "c"}).Editable(now); err != nil {
		t.Errorf("unfrozen cart: got %v, want nil", err)
	}
	live := Cart{ID: "c", CheckoutOrder: "o", CheckoutUntil: now.Add(time.Second)}
	if err := live.Editable(now); !errors.Is(err, ErrCheckoutInProgress) {
		t.Errorf("live checkout: got %v, want ErrCheckoutInProgress", err)
	}
	stale := Cart{ID: "c", CheckoutOrder: "o", CheckoutUntil: now}
	var se *StaleCheckoutError
	if err := stale.Editable(now); !errors.As(err, &se) || se.CartID != "c" || se.OrderID != "o" {
		t.Errorf("lease ended: got %v, want StaleCheckoutError{c, o}", err)
	}
}
