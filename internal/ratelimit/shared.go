package ratelimit

import (
	"math"
	"time"
)

// Several API processes must count one limit together, so a limit can also be kept as one
// number per key in a shared store: the generic cell rate algorithm (GCRA). The number is the
// theoretical arrival time (TAT): when the key's bucket would be full again. It is the same
// limit as Keyed's token bucket (Burst requests at once after idling, then PerMinute), but its
// whole state is one time, so a store updates it in one atomic conditional write.

// Interval is the time one request costs: a minute divided by the rate.
func (l Limit) Interval() time.Duration {
	return time.Duration(math.Ceil(float64(time.Minute) / l.PerMinute))
}

// Tolerance is how far ahead of now the TAT may run and still allow a request: Burst-1
// intervals, so Burst requests pass at once on a full bucket.
func (l Limit) Tolerance() time.Duration { return time.Duration(l.Burst-1) * l.Interval() }

// Decide is one request against a key whose TAT is tat (zero: never seen): allowed, it
// returns the new TAT to store; refused, the TAT stays and retryAfter says when a request
// would pass. A store that cannot run Decide inside its atomic update writes the same rule in
// its own terms (mongostore's rate limits).
func (l Limit) Decide(tat, now time.Time) (next time.Time, ok bool, retryAfter time.Duration) {
	if l.Off() {
		return tat, true, 0
	}
	if tat.Before(now) {
		tat = now
	}
	if ahead := tat.Sub(now); ahead > l.Tolerance() {
		return tat, false, ahead - l.Tolerance()
	}
	return tat.Add(l.Interval()), true, 0
}
