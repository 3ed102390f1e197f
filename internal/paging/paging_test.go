package paging

import (
	"errors"
	"strings"
	"testing"

	"github.com/shardmart/shardmart/internal/validation"
)

func TestNormalize(t *testing.T) {
	for _, tt := range []struct {
		limit, want int
		ok          bool
	}{{0, DefaultLimit, true}, {1, 1, true}, {MaxLimit, MaxLimit, true}, {MaxLimit + 1, 0, false}, {-1, 0, false}} {
		got, err := Request{Limit: tt.limit}.Normalize()
		if tt.ok && (err != nil || got.Limit != tt.want) {
			t.Errorf("limit %d: got %d, %v; want %d", tt.limit, got.Limit, err, tt.want)
		}
		if f, _ := validation.Fields(err); !tt.ok && (len(f) != 1 || f[0].Field != "limit") {
			t.Errorf("limit %d: got %v, want a validation error on limit", tt.limit, err)
		}
	}
}

func TestBuildAndCursorRoundTrip(t *testing.T) {
	type pos struct{ N int }
	page := Build([]int{1, 2, 3}, 2, func(last int) any { return pos{last} })
	if len(page.Items) != 2 || page.Next == "" {
		t.Fatalf("got %v next %q, want 2 items and a cursor", page.Items, page.Next)
	}
	var p pos
	if err := Decode(page.Next, &p); err != nil || p.N != 2 {
		t.Errorf("cursor decodes to %+v, %v; want position of the last item (2)", p, err)
	}
	if last := Build([]int{1, 2}, 2, func(int) any { return nil }); last.Next != "" {
		t.Errorf("exactly limit items: got cursor %q, want none", last.Next)
	}
	var v *validation.Error
	if err := Decode("%%%not-a-cursor", &p); !errors.As(err, &v) || v.Fields[0].Field != "cursor" {
		t.Errorf("foreign cursor: got %v, want a validation error on cursor", err)
	}
}

// Every cursor Encode makes has the documented shape, whatever the position's length; what
// has another shape is refused before it is decoded.
func TestCursorShape(t *testing.T) {
	for n := 0; n < 200; n++ {
		c := Encode(struct {
			S string `json:"s"`
			N int    `json:"n"`
		}{strings.Repeat("x", n), n})
		if !ValidCursor(c) {
			t.Fatalf("Encode made %q, which does not match %s", c, CursorPattern)
		}
		if n < 5 {
			var back struct{ S string }
			if err := Decode(c[:len(c)/2]+"\n"+c[len(c)/2:], &back); err == nil {
				t.Errorf("a cursor with a line break was decoded")
			}
		}
	}
	for _, bad := range []string{"e", "eyJ9e", "abcd", "ey J9", "e30=", strings.Repeat("e", MaxCursorLen+2)} {
		if ValidCursor(bad) {
			t.Errorf("ValidCursor(%q) = true", bad)
		}
		if _, err := (Request{Cursor: bad}).Normalize(); err == nil {
			t.Errorf("Normalize accepted cursor %q", bad)
		}
	}
	if !ValidCursor("") || !ValidCursor(Encode(struct{}{})) {
		t.Error("the empty cursor or an empty object's is refused")
	}
}
