package order

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/validation"
)

func TestStateMachine(t *testing.T) {
	all := []Status{Created, Paid, Shipped, Delivered, Cancelled}
	legal := map[[2]Status]bool{
		{Created, Paid}: true, {Created, Cancelled}: true,
		{Paid, Shipped}: true, {Paid, Cancelled}: true,
		{Shipped, Delivered}: true,
	}
	for _, from := range all {
		for _, to := range all {
			want := legal[[2]Status{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
			o := Order{Status: from}
			err := o.TransitionTo(to, time.Unix(1, 0))
			if want && (err != nil || o.Status != to) {
				t.Errorf("%s -> %s: got %v, status %s", from, to, err, o.Status)
			}
			if !want && (!errors.Is(err, ErrIllegalTransition) || o.Status != from) {
				t.Errorf("%s -> %s: got %v, status %s; want ErrIllegalTransition and no change", from, to, err, o.Status)
			}
		}
	}
	if !Restocks(Cancelled) || Restocks(Delivered) {
		t.Error("only cancellation returns stock")
	}
}

func TestIdempotencyKeyPattern(t *testing.T) {
	for key, ok := range map[string]bool{"abc-123": true, "": false, "has space": false, string(make([]byte, 129)): false, "ключ": false} {
		if keyPattern.MatchString(key) != ok {
			t.Errorf("key %q accepted %v, want %v", key, !ok, ok)
		}
	}
}

func TestValidatePlacement(t *testing.T) {
	ok := Placement{Zone: "eu-west", Lines: []Line{{ProductID: "p1", Category: "c", Quantity: 2}}}
	if err := ValidatePlacement(ok); err != nil {
		t.Fatalf("valid placement: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(p *Placement)
		field string
	}{
		{"bad zone", func(p *Placement) { p.Zone = "EU West" }, "zone"},
		{"zero quantity", func(p *Placement) { p.Lines[0].Quantity = 0 }, "quantity"},
		{"quantity past the cart's cap", func(p *Placement) { p.Lines[0].Quantity = 1000 }, "quantity"},
		{"duplicate product", func(p *Placement) { p.Lines = append(p.Lines, p.Lines[0]) }, "items"},
		{"no category", func(p *Placement) { p.Lines[0].Category = "" }, "items"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			p.Lines = append([]Line{}, ok.Lines...)
			tc.edit(&p)
			fields, isField := validation.Fields(ValidatePlacement(p))
			if !isField || len(fields) == 0 || fields[0].Field != tc.field {
				t.Errorf("got %v, want a problem naming %q", fields, tc.field)
			}
		})
	}
	if err := ValidatePlacement(Placement{Zone: "eu-west"}); !errors.Is(err, ErrEmptyCart) {
		t.Errorf("no lines: got %v, want ErrEmptyCart", err)
	}
}

func TestNewPricesAndTotals(t *testing.T) {
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	p := Placement{OrderID: "o1", UserID: "u1", CartID: "c1", Zone: "eu-west", IdempotencyKey: "k", At: at}
	o, err := New(p, []Priced{
		{Line: Line{ProductID: "a", Category: "x", Quantity: 3}, Name: "A", UnitPrice: 1999},
		{Line: Line{ProductID: "b", Category: "y", Quantity: 1}, Name: "B", UnitPrice: 5},
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.Total != 3*1999+5 || o.Status != Created || len(o.Items) != 2 || o.Items[0].UnitPrice != 1999 || o.Items[1].Name != "B" {
		t.Errorf("got %+v", o)
	}
	if o.ID != "o1" || o.CartID != "c1" || !o.CreatedAt.Equal(at) || !o.UpdatedAt.Equal(at) {
		t.Errorf("placement fields not carried: %+v", o)
	}
	if _, err := New(p, []Priced{{Line: Line{ProductID: "a", Quantity: 999}, UnitPrice: money.Amount(math.MaxInt64 / 2)}}); err == nil {
		t.Error("an overflowing total was accepted")
	}
}
