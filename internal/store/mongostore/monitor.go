package mongostore

import (
	"context"
	"time"

	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/tracing"
)

// commandMonitor is the driver's command monitor feeding the command metric (obs), the traces
// (tr) and another monitor (extra), any of which may be nil; nil when all are.
func commandMonitor(obs func(command string, d time.Duration, err error), tr trace.Tracer, extra *mongoevent.CommandMonitor) *mongoevent.CommandMonitor {
	if obs == nil && tr == nil {
		return extra
	}
	done := func(ctx context.Context, name string, d time.Duration, err error) {
		if obs != nil {
			obs(name, d, err)
		}
		if tr != nil {
			// The driver reports when a command has finished; its span is placed back in time.
			end := time.Now()
			tracing.Statement(ctx, tr, "mongodb", name, end.Add(-d), end, err)
		}
	}
	m := &mongoevent.CommandMonitor{
		Succeeded: func(ctx context.Context, e *mongoevent.CommandSucceededEvent) {
			done(ctx, e.CommandName, e.Duration, nil)
		},
		Failed: func(ctx context.Context, e *mongoevent.CommandFailedEvent) {
			done(ctx, e.CommandName, e.Duration, e.Failure)
		},
	}
	if extra != nil {
		m.Started = extra.Started
		if extra.Succeeded != nil {
			m.Succeeded = func(ctx context.Context, e *mongoevent.CommandSucceededEvent) {
				done(ctx, e.CommandName, e.Duration, nil)
				extra.Succeeded(ctx, e)
			}
		}
		if extra.Failed != nil {
			m.Failed = func(ctx context.Context, e *mongoevent.CommandFailedEvent) {
				done(ctx, e.CommandName, e.Duration, e.Failure)
				extra.Failed(ctx, e)
			}
		}
	}
	return m
}
