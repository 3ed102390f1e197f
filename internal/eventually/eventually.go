// Package eventually lets tests wait for a condition that becomes true on its own time (a
// replica catching up, a TTL running out, a listener closing) by polling it, never by
// sleeping a fixed time: the wait lasts as long as the condition needs, and a condition that
// never holds fails the test with what was last seen instead of a later, puzzling assertion.
package eventually

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// firstPoll is the first pause between two checks; pauses then double up to the cap.
const firstPoll = 10 * time.Millisecond

// maxPoll bounds the pause between checks: a hundredth of the wait, so long waits (a Cassandra
// node republishing its load every minute) do not hammer the server, but at most 250 ms, so a
// test that reports how long a condition took to hold reports it to a quarter second.
func maxPoll(within time.Duration) time.Duration {
	return min(max(within/100, firstPoll), 250*time.Millisecond)
}

// Until calls check until it returns nil and returns nil, or returns an error wrapping
// ctx.Err() and check's last error once ctx is done. The pause between calls starts at 10 ms
// and doubles up to a hundredth of the time ctx has left (at most 250 ms).
func Until(ctx context.Context, check func() error) error {
	limit := maxPoll(time.Hour)
	if d, ok := ctx.Deadline(); ok {
		limit = maxPoll(time.Until(d))
	}
	last, stop := poll(ctx, limit, check)
	switch {
	case stop:
		return last
	case last != nil:
		return fmt.Errorf("%w; last: %w", ctx.Err(), last)
	}
	return nil
}

// Stop marks err as final: Until returns it, and NoError fails with it, at once instead of
// checking again (a failed query, not a condition still false).
func Stop(err error) error { return stopped{err} }

type stopped struct{ err error }

func (s stopped) Error() string { return s.err.Error() }
func (s stopped) Unwrap() error { return s.err }

// poll calls check until it returns nil or ctx is done, and returns check's last error (nil
// when it passed) and whether check stopped the wait.
func poll(ctx context.Context, limit time.Duration, check func() error) (last error, stop bool) {
	pause := firstPoll
	t := time.NewTimer(pause)
	defer t.Stop()
	for {
		err := check()
		if err == nil {
			return nil, false
		}
		var s stopped
		if errors.As(err, &s) {
			return s.err, true
		}
		t.Reset(pause)
		select {
		case <-ctx.Done():
			return err, false
		case <-t.C:
		}
		pause = min(2*pause, limit)
	}
}

// NoError calls check until it returns nil, failing t with check's last error when it still
// fails after within. check runs on the test's goroutine, so it may itself call t.Fatal (a
// failure no wait can mend).
func NoError(t testing.TB, within time.Duration, check func() error) {
	t.Helper()
	last, stop := wait(within, check)
	switch {
	case stop:
		t.Fatalf("%v", last)
	case last != nil:
		t.Fatalf("still failing after %s: %v", within, last)
	}
}

// True polls cond until it holds, failing t after within with what the test waited for.
func True(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	last, _ := wait(within, func() error {
		if cond() {
			return nil
		}
		return errFalse
	})
	if last != nil {
		t.Fatalf("timed out after %s waiting for %s", within, what)
	}
}

var errFalse = errors.New("condition false")

func wait(within time.Duration, check func() error) (last error, stop bool) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	return poll(ctx, maxPoll(within), check)
}

// Context is a context that ends after d or when the test ends, whichever is first: the bound
// of one test's calls to a server.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
