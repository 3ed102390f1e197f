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
	// Reason names the state and, where the driver says, the consistency level: "write at
	// QUORUM timed out (1 of 2 replicas acknowledged)", "the primary stepped down
	// (NotWritablePrimary)". No hosts, no secrets: it is shown to clients.
	Reason     string
	RetryAfter time.Duration // when a retry is worth making; at least a second
	Err        error
	// Family and Backend say which store was unavailable ("carts", "cassandra"): placement
	// fills them in for every repository call, so the answer names the data that is affected.
	Family, Backend string
	// Aborted says the operation certainly took no effect (its transaction aborted before any
	// commit), so what it held for the request may be released at once; the outcome of the
	// request itself is still open to a retry.
	Aborted bool
}

// NothingCommitted reports Aborted, for callers that release what a failed request held.
func (e *UnavailableError) NothingCommitted() bool { return e.Aborted }

// Describe is Reason prefixed with where it happened, when that is known: "carts on
// cassandra: write at QUORUM timed out (1 of 2 replicas acknowledged)".
func (e *UnavailableError) Describe() string {
	switch {
	case e.Family != "" && e.Backend != "":
		return e.Family + " on " + e.Backend + ": " + e.Reason
	case e.Family != "" || e.Backend != "":
		return e.Family + e.Backend + ": " + e.Reason
	}
	return e.Reason
}

func (e *UnavailableError) Error() string {
	return "storage temporarily unavailable (" + e.Describe() + "): " + e.Err.Error()
}

// Unwrap exposes both the sentinel and the cause.
func (e *UnavailableError) Unwrap() []error { return []error{ErrUnavailable, e.Err} }
