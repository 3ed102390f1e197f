package mongostore

import (
	"errors"
	"fmt"
	"testing"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/store"
)

// A confirming read that finds the product or order gone answers for certain: only that
// sentinel is reachable. Any other read error leaves the outcome open: ErrUnavailable, no
// not-found sentinel, and nothing committed.
func TestUnconfirmedRefusalErrors(t *testing.T) {
	refusal := &catalog.InsufficientStockError{ProductID: "p1", Zone: "eu", Requested: 2, Available: 1}
	driver := errors.New("connection reset (scripted)")
	for _, tc := range []struct {
		name        string
		read        error
		want        error
		unavailable bool
	}{
		{"product gone", catalog.ErrNotFound, catalog.ErrNotFound, false},
		{"order gone", fmt.Errorf("read order o1: %w", order.ErrNotFound), order.ErrNotFound, false},
		{"read failed", fmt.Errorf("mongo: read product claim p1: %w", driver), driver, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := unconfirmed(refusal, tc.read)
			if !errors.Is(err, tc.want) {
				t.Errorf("%v: does not carry %v", err, tc.want)
			}
			if got := errors.Is(err, store.ErrUnavailable); got != tc.unavailable {
				t.Errorf("%v: unavailable %v, want %v", err, got, tc.unavailable)
			}
			for _, gone := range []error{catalog.ErrNotFound, order.ErrNotFound} {
				if gone != tc.want && errors.Is(err, gone) {
					t.Errorf("%v: carries %v as well", err, gone)
				}
			}
			var short *catalog.InsufficientStockError
			if errors.As(err, &short) {
				t.Errorf("%v: an unconfirmed refusal is still reachable", err)
			}
			var ue *store.UnavailableError
			if errors.As(err, &ue) != tc.unavailable || tc.unavailable && !ue.NothingCommitted() {
				t.Errorf("%v: want an UnavailableError saying nothing committed: %v", err, tc.unavailable)
			}
		})
	}
}
