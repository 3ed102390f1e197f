package order

import (
	"errors"
	"testing"
	"time"
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

func TestValidateKey(t *testing.T) {
	for key, ok := range map[string]bool{"abc-123": true, "": false, "has space": false, string(make([]byte, 129)): false, "ключ": false} {
		if err := ValidateKey(key); (err == nil) != ok {
			t.Errorf("ValidateKey(%q) = %v, want ok=%v", key, err, ok)
		}
	}
}
