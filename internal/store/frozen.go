package store

import (
	"errors"
	"time"
)

// ErrFrozen marks a write refused because its family is frozen for a move to another store
// (`shardmart migrate run --to mongo --family orders`). It comes wrapped in an
// UnavailableError (errors.Is(err, ErrUnavailable) holds too), so HTTP answers 503 with
// Retry-After and the request may be retried as it is: the write did not take effect.
var ErrFrozen = errors.New("writes frozen for a move to another store")

// FrozenRetryAfter is the retry hint a frozen write carries: a freeze lasts seconds.
const FrozenRetryAfter = 2 * time.Second

// Frozen is the error a frozen family's write returns.
func Frozen(family, backend string) error {
	return &UnavailableError{Reason: "the " + family + " family is moving to another store (a short write freeze)",
		RetryAfter: FrozenRetryAfter, Err: ErrFrozen, Family: family, Backend: backend, Aborted: true}
}
