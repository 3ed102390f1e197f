package placement

import (
	"errors"
	"testing"
	"time"
)

// TestDecoratorsApplyTheBackendsReadingOfErrors: the decorator every repository call passes
// through replaces a failed call's error with what the serving backend's Unavailable makes of
// it, reports that error, and leaves a successful call alone.
func TestDecoratorsApplyTheBackendsReadingOfErrors(t *testing.T) {
	raw, mapped := errors.New("not writable primary"), errors.New("unavailable: not writable primary")
	var seen error
	calls := 0
	tm := timer{backend: "b",
		observe: func(_, _ string, _ time.Duration, err error) { seen = err },
		unavailable: func(err error) error {
			calls++
			if err == raw {
				return mapped
			}
			return err
		}}
	err := raw
	tm.done("orders.place", time.Now(), &err, nil)
	if err != mapped || seen != mapped {
		t.Errorf("failed call: error %v, observed %v, want both %v", err, seen, mapped)
	}
	err = nil
	tm.done("orders.place", time.Now(), &err, nil)
	if err != nil || calls != 1 {
		t.Errorf("successful call: error %v, mapper called %d times, want nil and 1", err, calls)
	}
	// Without an observer (no metrics) the mapping still runs.
	tm.observe, err = nil, raw
	tm.done("orders.place", time.Now(), &err, nil)
	if err != mapped {
		t.Errorf("without an observer: error %v, want %v", err, mapped)
	}
}
