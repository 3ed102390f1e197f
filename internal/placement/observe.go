package placement

//go:generate go run ./observegen -o observe_gen.go

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/tracing"
)

// Store operations are timed here, around the repository interfaces, and not in each backend:
// the op of a call is then "<prefix>.<method in snake case>" by construction, whichever backend
// serves it, so one dashboard compares backends (TestObservedOpNames holds every decorator to
// that rule against its interface's method list).

// Decorate wraps every repository in s in a decorator that reads each failed call's error
// (transient, below) and reports the call to o.Observe (when set), labelled with the backend
// cfg assigns to its family. Open calls it once on the repositories it opened; a test may call
// it on repositories of its own, to see a backend's error exactly as the API does.
func (s *Stores) Decorate(cfg Config, o Options) {
	at := func(fam Family) timer {
		return timer{backend: cfg[fam], observe: o.Observe, tracer: o.Tracer, outcome: o.Outcome,
			unavailable: unavailable[cfg[fam]]}
	}
	s.Orders = observedOrders{s.Orders, at(Orders)}
	s.ProductSource = observedSource{sourceOf(s.Products), at(Orders)}
	s.Products = observedProducts{s.Products, at(Orders)}
	s.Outbox = observeOutbox(s.Outbox, at(Orders))
	s.Users = observedUsers{s.Users, at(Orders)}
	s.Carts = observedCarts{s.Carts, at(Carts)}
	s.Sessions = observedSessions{s.Sessions, at(Sessions)}
	s.Events = observedEvents{s.Events, at(Events)}
	s.History = observedHistory{s.History, at(History)}
	// s.Catalog is still the unwrapped reader (the products repository itself when the catalog
	// lives with the orders), so a product-page or search read is counted once, as catalog.*,
	// on every placement.
	s.Catalog = observedCatalog{s.Catalog, at(Catalog)}
	if s.CatalogSink != nil {
		s.CatalogSink = observedCatalogSink{s.CatalogSink, at(Catalog)}
	}
}

// timer finishes one call. done is deferred with its start evaluated at the defer statement,
// `defer t.done(ctx, op, time.Now(), &err, sp)`, which needs no closure per call; it may replace
// the call's error (the named result) with its reading of it (transient).
type timer struct {
	backend     string
	observe     func(backend, op string, d time.Duration, err error)
	unavailable func(error) error // the backend's reading of its driver's errors
	tracer      trace.Tracer      // nil: tracing off
	outcome     func(error) string
}

// span starts the operation's span when ctx belongs to a sampled request; sp is nil otherwise,
// so tracing off costs one comparison.
func (t timer) span(ctx context.Context, op string) (_ context.Context, sp trace.Span) {
	if t.tracer == nil || !trace.SpanFromContext(ctx).SpanContext().IsSampled() {
		return ctx, nil
	}
	return t.tracer.Start(ctx, op, trace.WithAttributes(tracing.KeyKind.String(tracing.KindStore),
		tracing.KeyBackend.String(t.backend), tracing.KeyOp.String(op)))
}

func (t timer) done(ctx context.Context, op string, start time.Time, err *error, sp trace.Span) {
	if *err != nil {
		*err = t.transient(ctx, op, *err)
	}
	if sp != nil {
		if t.outcome != nil {
			tracing.EndAs(sp, *err, t.outcome(*err))
		} else {
			tracing.End(sp, *err)
		}
	}
	if t.observe != nil {
		t.observe(t.backend, op, time.Since(start), *err)
	}
}

// observeOutbox keeps outbox.Parts working through the decorator: a partitioned log stays
// outbox.Partitioned, and each partition is timed as the outbox.
func observeOutbox(l outbox.Log, t timer) outbox.Log {
	if _, ok := l.(outbox.Partitioned); ok {
		if _, ok := l.(outbox.Leaser); ok {
			return observedLeasedOutbox{observedPartitionedOutbox{observedOutbox{l, t}}}
		}
		return observedPartitionedOutbox{observedOutbox{l, t}}
	}
	return observedOutbox{l, t}
}

type observedPartitionedOutbox struct{ observedOutbox }

// observedLeasedOutbox keeps a shared outbox's drain lease (outbox.Leaser) through the decorator.
type observedLeasedOutbox struct{ observedPartitionedOutbox }

// LastSeqs and Checkpoints keep outbox.Positions through the decorator, so the projector and
// the tail still read only the partitions that moved. A partitioned log without them is asked
// partition by partition.
func (l observedPartitionedOutbox) LastSeqs(ctx context.Context) (seqs []int64, err error) {
	ctx, sp := l.t.span(ctx, "outbox.last_seqs")
	defer l.t.done(ctx, "outbox.last_seqs", time.Now(), &err, sp)
	if p, ok := l.next.(outbox.Positions); ok {
		return p.LastSeqs(ctx)
	}
	return eachPartition(l.next, func(part outbox.Log) (int64, error) { return part.LastSeq(ctx) })
}

func (l observedPartitionedOutbox) Checkpoints(ctx context.Context, consumer string) (seqs []int64, err error) {
	ctx, sp := l.t.span(ctx, "outbox.checkpoints")
	defer l.t.done(ctx, "outbox.checkpoints", time.Now(), &err, sp)
	if p, ok := l.next.(outbox.Positions); ok {
		return p.Checkpoints(ctx, consumer)
	}
	return eachPartition(l.next, func(part outbox.Log) (int64, error) { return part.Checkpoint(ctx, consumer) })
}

func eachPartition(l outbox.Log, read func(outbox.Log) (int64, error)) ([]int64, error) {
	parts := outbox.Parts(l)
	out := make([]int64, len(parts))
	for i, part := range parts {
		var err error
		if out[i], err = read(part); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (l observedPartitionedOutbox) Partitions() []outbox.Log {
	parts := l.next.(outbox.Partitioned).Partitions()
	for i, p := range parts {
		parts[i] = observeOutbox(p, l.t)
	}
	return parts
}
