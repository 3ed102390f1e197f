package money

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in   string
		want Amount
		err  error
	}{
		{"0", 0, nil},
		{"12", 1200, nil},
		{"12.5", 1250, nil},
		{"12.50", 1250, nil},
		{"0.01", 1, nil},
		{"007.10", 710, nil},
		{"9999999999.99", Max, nil},
		{"9999999999", 999_999_999_900, nil},
		{"10000000000", 0, ErrRange},
		{"", 0, ErrSyntax},
		{".5", 0, ErrSyntax},
		{"5.", 0, ErrSyntax},
		{"1.234", 0, ErrSyntax},
		{"-1", 0, ErrSyntax},
		{"+1", 0, ErrSyntax},
		{"1e3", 0, ErrSyntax},
		{" 1", 0, ErrSyntax},
		{"1,000", 0, ErrSyntax},
		{"1.2.3", 0, ErrSyntax},
		{"０", 0, ErrSyntax},
		{"NaN", 0, ErrSyntax},
		{"123456789012345678901", 0, ErrSyntax},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if !errors.Is(err, c.err) || (err == nil && got != c.want) {
			t.Errorf("Parse(%q) = %d, %v; want %d, %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestString(t *testing.T) {
	cases := map[Amount]string{0: "0.00", 1: "0.01", 1250: "12.50", -5: "-0.05", -1250: "-12.50", Max: "9999999999.99",
		math.MinInt64: "-92233720368547758.08", math.MaxInt64: "92233720368547758.07"}
	for a, want := range cases {
		if got := a.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int64(a), got, want)
		}
	}
}

// TestStringIsSignUnitsCents: String and MarshalJSON write sign, units and two-digit cents,
// as fmt's "%s%d.%02d" of the magnitude does, across the whole range.
func TestStringIsSignUnitsCents(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 100_000 {
		a := Amount(rng.Int64())
		switch i % 4 {
		case 1:
			a = -a
		case 2:
			a %= 100_000
		case 3:
			a = -(a % 1000)
		}
		if a == math.MinInt64 {
			continue // its magnitude is no int64: TestString has it
		}
		sign, v := "", int64(a)
		if v < 0 {
			sign, v = "-", -v
		}
		want := fmt.Sprintf("%s%d.%02d", sign, v/100, v%100)
		if got := a.String(); got != want {
			t.Fatalf("%d.String() = %q, want %q", int64(a), got, want)
		}
		if b, err := a.MarshalJSON(); err != nil || string(b) != `"`+want+`"` {
			t.Fatalf("%d.MarshalJSON() = %s, %v; want %q", int64(a), b, err, `"`+want+`"`)
		}
	}
}

// BenchmarkMarshalJSON: an amount as every price and total in an answer is written.
func BenchmarkMarshalJSON(b *testing.B) {
	b.ReportAllocs()
	a := Amount(123456)
	for b.Loop() {
		if _, err := a.MarshalJSON(); err != nil {
			b.Fatal(err)
		}
		a++
	}
}

func TestArithmeticOverflow(t *testing.T) {
	if _, err := Amount(math.MaxInt64 / 2).Mul(3); err == nil {
		t.Error("Mul overflow not detected")
	}
	if v, err := Amount(250).Mul(4); err != nil || v != 1000 {
		t.Errorf("Mul = %d, %v", v, err)
	}
	if _, err := Amount(math.MaxInt64).Add(1); err == nil {
		t.Error("Add overflow not detected")
	}
	if _, err := Amount(math.MinInt64).Add(-1); err == nil {
		t.Error("Add underflow not detected")
	}
	if v, err := Amount(1).Add(-2); err != nil || v != -1 {
		t.Errorf("Add = %d, %v", v, err)
	}
}

func TestJSON(t *testing.T) {
	b, err := json.Marshal(struct{ P Amount }{1250})
	if err != nil || string(b) != `{"P":"12.50"}` {
		t.Fatalf("marshal = %s, %v", b, err)
	}
	var v struct{ P Amount }
	if err := json.Unmarshal([]byte(`{"P":"3.5"}`), &v); err != nil || v.P != 350 {
		t.Fatalf("unmarshal = %d, %v", v.P, err)
	}
	for _, bad := range []string{`{"P":3.5}`, `{"P":350}`, `{"P":"-1"}`, `{"P":null}`, `{"P":"1e2"}`} {
		v.P = 7
		if err := json.Unmarshal([]byte(bad), &v); err == nil && v.P != 7 {
			t.Errorf("%s accepted as %d", bad, v.P)
		} else if bad != `{"P":null}` && err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// Totals above Max (an order of 100 lines of 999 units at Max) survive a JSON round trip, up
// to the largest amount; past it, decoding fails rather than wraps.
func TestJSONCarriesTotalsAboveMax(t *testing.T) {
	for _, a := range []Amount{Max * 999 * 100, math.MaxInt64} {
		raw, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var back Amount
		if err := json.Unmarshal(raw, &back); err != nil || back != a {
			t.Errorf("JSON round trip of %s: %d, %v", raw, back, err)
		}
	}
	var v Amount
	if err := json.Unmarshal([]byte(`"92233720368547758.08"`), &v); !errors.Is(err, ErrRange) {
		t.Errorf("one cent past the largest amount: %v, want ErrRange", err)
	}
}

// FuzzParse: Parse never panics; what it accepts is in range and survives String -> Parse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "12.5", "12.50", "9999999999.99", "10000000000", "1.234", "-1", "", ".", "1e3", "00.00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRange) {
				t.Fatalf("Parse(%q): unexpected error %v", s, err)
			}
			return
		}
		if a < 0 || a > Max {
			t.Fatalf("Parse(%q) = %d out of range", s, a)
		}
		back, err := Parse(a.String())
		if err != nil || back != a {
			t.Fatalf("round trip %q -> %s -> %d, %v", s, a, back, err)
		}
		var j Amount
		raw, _ := json.Marshal(a)
		if err := json.Unmarshal(raw, &j); err != nil || j != a {
			t.Fatalf("JSON round trip %s: %d, %v", raw, j, err)
		}
	})
}
