// Package money represents prices and totals as integer minor units (cents).
// Floats never touch money: JSON carries amounts as decimal strings such as "12.50".
package money

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Amount is a non-negative or negative quantity of minor currency units (1/100).
type Amount int64

// Max is the largest amount shardmart accepts from input: 10^12 - 1 cents (just under ten billion).
// It keeps totals of many lines far from int64 overflow.
const Max Amount = 999_999_999_999

// ErrSyntax reports an amount that is not a plain decimal with at most two fraction digits.
var ErrSyntax = errors.New(`must be a decimal string like "12.50" with at most 2 fraction digits`)

// ErrRange reports an amount outside [0, Max].
var ErrRange = errors.New("must be between 0 and 9999999999.99")

// Parse reads a non-negative decimal string: "12", "12.5", "12.50". No sign, exponent,
// thousands separator or surrounding space is accepted, so every amount has one spelling family.
func Parse(s string) (Amount, error) {
	if s == "" || len(s) > 20 {
		return 0, ErrSyntax
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || (hasDot && (frac == "" || len(frac) > 2)) {
		return 0, ErrSyntax
	}
	if !digits(whole) || !digits(frac) {
		return 0, ErrSyntax
	}
	if len(whole) > 10 {
		return 0, ErrRange
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, ErrSyntax
	}
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt(frac, 10, 64)
		if len(frac) == 1 {
			f *= 10
		}
	}
	a := Amount(w*100 + f)
	if a > Max {
		return 0, ErrRange
	}
	return a, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// MustParse is for constants in tests and demo data.
func MustParse(s string) Amount {
	a, err := Parse(s)
	if err != nil {
		panic(fmt.Sprintf("money.MustParse(%q): %v", s, err))
	}
	return a
}

// String renders the canonical form with exactly two fraction digits.
func (a Amount) String() string {
	var buf [24]byte
	return string(a.appendDecimal(buf[:0]))
}

// appendDecimal appends the amount as String writes it. Every JSON answer carries amounts, so
// it formats without fmt and allocates nothing of its own.
func (a Amount) appendDecimal(b []byte) []byte {
	u := uint64(a)
	if a < 0 {
		b = append(b, '-')
		u = -u // two's complement: the magnitude, math.MinInt64's included
	}
	b = strconv.AppendUint(b, u/100, 10)
	cents := u % 100
	return append(b, '.', byte('0'+cents/10), byte('0'+cents%10))
}

// Mul multiplies by a quantity, failing instead of overflowing.
func (a Amount) Mul(qty int64) (Amount, error) {
	if qty != 0 && (int64(a) > math.MaxInt64/qty || int64(a) < math.MinInt64/qty) {
		return 0, fmt.Errorf("money: %s x %d overflows", a, qty)
	}
	return a * Amount(qty), nil
}

// Add sums two amounts, failing instead of overflowing.
func (a Amount) Add(b Amount) (Amount, error) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, fmt.Errorf("money: %s + %s overflows", a, b)
	}
	return s, nil
}

// MarshalJSON writes the amount as a JSON string.
func (a Amount) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 26), '"')
	return append(a.appendDecimal(b), '"'), nil
}

// UnmarshalJSON accepts only a JSON string; a JSON number is refused so that
// no client can send a binary float by accident. It reads back every non-negative amount
// MarshalJSON writes, not only what Parse accepts from input: an order event or a stored
// document carries totals far above Max (100 lines of 999 units at Max), and a projector that
// could not decode one would stop at it for good.
func (a *Amount) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return ErrSyntax
	}
	v, err := parseStored(s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// parseStored is Parse without the input bound: any amount up to the type's maximum.
func parseStored(s string) (Amount, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || (hasDot && (frac == "" || len(frac) > 2)) || !digits(whole) || !digits(frac) {
		return 0, ErrSyntax
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, ErrRange
	}
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt(frac, 10, 64)
		if len(frac) == 1 {
			f *= 10
		}
	}
	v, err := Amount(w).Mul(100)
	if err == nil {
		v, err = v.Add(Amount(f))
	}
	if err != nil {
		return 0, ErrRange
	}
	return v, nil
}
