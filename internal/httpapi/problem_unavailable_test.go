package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
)

type transientErr struct{ unavailable bool }

func (e transientErr) Error() string     { return "transient" }
func (e transientErr) Unavailable() bool { return e.unavailable }

// A store error that says it is transient answers 503 with Retry-After; one that says it is
// not, or says nothing, stays a 500.
func TestTransientStoreErrorIs503(t *testing.T) {
	p, internal := toProblem(fmt.Errorf("put item: %w", transientErr{unavailable: true}))
	if p.Status != http.StatusServiceUnavailable || p.RetryAfter == "" || !internal {
		t.Fatalf("transient: got status %d, Retry-After %q, logged %v; want 503, a Retry-After, logged", p.Status, p.RetryAfter, internal)
	}
	for _, err := range []error{transientErr{unavailable: false}, errors.New("boom")} {
		if p, _ := toProblem(err); p.Status != http.StatusInternalServerError {
			t.Errorf("%v: got status %d, want 500", err, p.Status)
		}
	}
}
