package repair

import (
	"context"
	"time"

	"github.com/robfig/cron/v3"
)

// Clock is what Loop waits with; tests give it a fake.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// RealClock is the wall clock.
type RealClock struct{}

func (RealClock) Now() time.Time                         { return time.Now() }
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Loop calls run at each time of sched until ctx ends. A run still going when the next time
// comes makes that time skipped, not overlapped: the next run starts at the first scheduled
// time after the last one ended.
func Loop(ctx context.Context, sched cron.Schedule, clock Clock, run func(ctx context.Context, at time.Time)) {
	for {
		next := sched.Next(clock.Now())
		select {
		case <-ctx.Done():
			return
		case <-clock.After(next.Sub(clock.Now())):
		}
		if ctx.Err() != nil {
			return
		}
		run(ctx, next)
	}
}
