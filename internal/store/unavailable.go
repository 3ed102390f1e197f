// Package store holds what every storage backend (internal/store/*store) reports in the same
// words, so the layers above can act on it without knowing which backend answered.
package store

import (
	"errors"
	"time"
)

// ErrUnavailable marks a failure that a healthy cluster heals by itself in seconds: a replica
// set between primaries (an election, a step-down, a primary frozen or cut off), a write
// concern that timed out, a connection lost mid-operation. The request did not take effect,
// or its outcome is unknown; either way the same request may be retried (orders carry an
// Idempotency-Key, so a retry never places a second one). HTTP answers it 503 with
// Retry-After, never 500.
var ErrUnavailable = errors.New("storage temporarily unavailable")

// UnavailableError is ErrUnavailable with the backend's reason and a hint of when to retry.
// errors.Is(err, ErrUnavailable) holds, and the driver's error stays reachable with errors.As.
type UnavailableError struct {
	Reason     string        // "no writable primary (election in progress)", …: no secrets, shown to clients
	RetryAfter time.Duration // when a retry is worth making; at least a second
	Err        error
	// Aborted says the operation certainly took no effect (its transaction aborted before any
	// commit), so what it held for the request may be released at once; the outcome of the
	// request itself is still open to a retry.
	Aborted bool
}

// NothingCommitted reports Aborted, for callers that release what a failed request held.
func (e *UnavailableError) NothingCommitted() bool { return e.Aborted }

func (e *UnavailableError) Error() string {
	return "storage temporarily unavailable (" + e.Reason + "): " + e.Err.Error()
}

// Unwrap exposes both the sentinel and the cause.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }
