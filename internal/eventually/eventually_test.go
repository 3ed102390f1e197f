package eventually_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/eventually"
)

// recorder is a testing.TB that records Fatalf instead of failing the real test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	panic(r) // stops the wait as t.Fatal's Goexit would
}

// run calls f with r, returning once f returned or failed r.
func (r *recorder) run(f func(testing.TB)) {
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	f(r)
}

func TestUntilReturnsOnceTheCheckPasses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls := 0
	err := eventually.Until(ctx, func() error {
		if calls++; calls < 4 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Errorf("got %v after %d calls, want nil after 4", err, calls)
	}
}

func TestUntilReportsTheDeadlineAndTheLastError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	errLast := errors.New("replica 2 behind")
	err := eventually.Until(ctx, func() error { return errLast })
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errLast) {
		t.Errorf("got %v, want both the deadline and the last error", err)
	}
}

func TestNoErrorFailsWithTheLastError(t *testing.T) {
	r := &recorder{}
	start := time.Now()
	n := 0
	r.run(func(tb testing.TB) {
		eventually.NoError(tb, 100*time.Millisecond, func() error { n++; return fmt.Errorf("attempt %d", n) })
	})
	if want := fmt.Sprintf("attempt %d", n); !strings.Contains(r.failed, want) || n < 2 {
		t.Errorf("failure %q after %d checks, want it to name %q", r.failed, n, want)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Errorf("gave up after %s, before the 100 ms it was given", took)
	}
}

func TestTrueNamesWhatItWaitedFor(t *testing.T) {
	r := &recorder{}
	r.run(func(tb testing.TB) {
		eventually.True(tb, 30*time.Millisecond, "the listener to close", func() bool { return false })
	})
	if !strings.Contains(r.failed, "the listener to close") {
		t.Errorf("failure %q does not name the condition", r.failed)
	}
	r = &recorder{}
	n := 0
	r.run(func(tb testing.TB) {
		eventually.True(tb, 10*time.Second, "three calls", func() bool { n++; return n == 3 })
	})
	if r.failed != "" || n != 3 {
		t.Errorf("failed %q after %d calls, want success on the third", r.failed, n)
	}
}

func TestStopEndsTheWaitAtOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errQuery := errors.New("unauthorized")
	calls := 0
	start := time.Now()
	err := eventually.Until(ctx, func() error { calls++; return eventually.Stop(fmt.Errorf("count: %w", errQuery)) })
	if !errors.Is(err, errQuery) || errors.Is(err, context.DeadlineExceeded) || calls != 1 || time.Since(start) > 10*time.Second {
		t.Errorf("Until: %v after %d calls, want the stopping error after one call", err, calls)
	}
	r := &recorder{}
	r.run(func(tb testing.TB) {
		eventually.NoError(tb, time.Minute, func() error { return eventually.Stop(errQuery) })
	})
	if r.failed != errQuery.Error() {
		t.Errorf("NoError failed with %q, want %q at once", r.failed, errQuery)
	}
}
