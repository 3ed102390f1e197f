package robustness

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The cart-at-checkout checker: the order must equal the cart as the client's acknowledged
// edits left it; an unknown edit may count or not, and never half.
func TestCheckoutChecker(t *testing.T) {
	t0 := time.Now()
	put := func(a, b int, p string, q int64) op { return at(t0, 0, a, b, cartEditOp{product: p, qty: q}, result{}) }
	unknownPut := func(a int, p string, q int64) op { return unknownAt(t0, 0, a, cartEditOp{product: p, qty: q}) }
	checkout := func(a, b int, lines string) op { return at(t0, 0, a, b, checkoutOp{key: "k"}, result{value: lines}) }
	cases := []struct {
		name string
		ops  []op
		want porcupine.CheckResult
	}{
		{"the last acknowledged edits", []op{put(0, 10, "a", 2), put(20, 30, "b", 1), put(40, 50, "a", 3), checkout(60, 70, "a=3,b=1")}, porcupine.Ok},
		{"a removed line", []op{put(0, 10, "a", 2), put(20, 30, "b", 1), put(40, 50, "a", 0), checkout(60, 70, "b=1")}, porcupine.Ok},
		{"an acknowledged edit missing", []op{put(0, 10, "a", 2), put(20, 30, "b", 1), checkout(60, 70, "a=2")}, porcupine.Illegal},
		{"an older quantity", []op{put(0, 10, "a", 2), put(20, 30, "a", 3), checkout(60, 70, "a=2")}, porcupine.Illegal},
		{"a line never put", []op{put(0, 10, "a", 2), checkout(60, 70, "a=2,c=1")}, porcupine.Illegal},
		{"an unknown edit applied", []op{put(0, 10, "a", 2), unknownPut(20, "b", 1), checkout(60, 70, "a=2,b=1")}, porcupine.Ok},
		{"an unknown edit not applied", []op{put(0, 10, "a", 2), unknownPut(20, "b", 1), checkout(60, 70, "a=2")}, porcupine.Ok},
		{"an unknown edit half applied", []op{put(0, 10, "a", 2), unknownPut(20, "b", 1), checkout(60, 70, "a=2,b=2")}, porcupine.Illegal},
		{"empty refused on an empty cart", []op{put(0, 10, "a", 0), at(t0, 0, 20, 30, checkoutOp{key: "k"}, result{refused: true})}, porcupine.Ok},
		{"empty refused on a full cart", []op{put(0, 10, "a", 1), at(t0, 0, 20, 30, checkoutOp{key: "k"}, result{refused: true})}, porcupine.Illegal},
		{"a lost checkout found not placed", []op{put(0, 10, "a", 1), checkout(20, 90, notPlaced)}, porcupine.Ok},
		{"an order from an empty cart", []op{checkout(20, 30, "")}, porcupine.Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if v := check(checkoutModel(), "k", c.ops, t0, 10*time.Second); v.result != c.want {
				t.Fatalf("got %s, want %s", v.result, c.want)
			}
		})
	}
}

func TestApplyEdit(t *testing.T) {
	s := applyEdit("", cartEditOp{product: "b", qty: 2})
	s = applyEdit(s, cartEditOp{product: "a", qty: 1})
	if s != "a=1,b=2" {
		t.Fatalf("got %q, want sorted lines a=1,b=2", s)
	}
	if s = applyEdit(s, cartEditOp{product: "b"}); s != "a=1" {
		t.Fatalf("remove b: got %q", s)
	}
	if s = applyEdit(s, cartEditOp{product: "a"}); s != "" {
		t.Fatalf("remove the last line: got %q", s)
	}
}
