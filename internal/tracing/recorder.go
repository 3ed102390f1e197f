package tracing

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Span is one finished span as the admin route serves it and the breakdown reads it.
type Span struct {
	TraceID  string            `json:"trace_id"`
	SpanID   string            `json:"span_id"`
	ParentID string            `json:"parent_id,omitempty"`
	Name     string            `json:"name"`
	Start    time.Time         `json:"start"`
	End      time.Time         `json:"end"`
	Attrs    map[string]string `json:"attrs,omitempty"`
	// Events counts the span's events by name (EventLWTRetry).
	Events map[string]int `json:"events,omitempty"`
	Error  bool           `json:"error,omitempty"`
}

// Duration is End - Start.
func (s Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// Recorder is a span processor that keeps the most recent complete traces, at most keep spans
// in all. A trace's spans wait in pending until its local root ends, so the ring never holds
// a request with its first statements already evicted: the breakdown would undercount it.
type Recorder struct {
	keep int

	mu       sync.Mutex
	pending  map[string][]Span // by trace id, until the root ends
	npending int
	done     [][]Span // complete traces, oldest first
	ndone    int
}

var _ sdktrace.SpanProcessor = (*Recorder)(nil)

// NewRecorder keeps at most keep spans (0: DefaultKeep).
func NewRecorder(keep int) *Recorder {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Recorder{keep: keep, pending: map[string][]Span{}}
}

func (r *Recorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd copies the span; the root's end moves its trace to the ring, evicting the oldest.
func (r *Recorder) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	sp := Span{TraceID: s.SpanContext().TraceID().String(), SpanID: s.SpanContext().SpanID().String(),
		Name: s.Name(), Start: s.StartTime(), End: s.EndTime(), Error: s.Status().Code == codes.Error}
	root := !s.Parent().IsValid() || s.Parent().IsRemote()
	if s.Parent().IsValid() && !s.Parent().IsRemote() {
		sp.ParentID = s.Parent().SpanID().String()
	}
	if attrs := s.Attributes(); len(attrs) > 0 {
		sp.Attrs = make(map[string]string, len(attrs))
		for _, kv := range attrs {
			sp.Attrs[string(kv.Key)] = kv.Value.Emit()
		}
	}
	if evs := s.Events(); len(evs) > 0 {
		sp.Events = map[string]int{}
		for _, e := range evs {
			sp.Events[e.Name]++
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !root {
		r.pending[sp.TraceID] = append(r.pending[sp.TraceID], sp)
		r.npending++
		if r.npending > r.keep {
			// Roots that never end (a leak) must not grow memory: drop all that waits.
			clear(r.pending)
			r.npending = 0
		}
		return
	}
	trace := append(r.pending[sp.TraceID], sp)
	r.npending -= len(trace) - 1
	delete(r.pending, sp.TraceID)
	if len(trace) > r.keep {
		return
	}
	r.done = append(r.done, trace)
	r.ndone += len(trace)
	for r.ndone > r.keep {
		r.ndone -= len(r.done[0])
		r.done[0] = nil
		r.done = r.done[1:]
	}
}

// Spans returns the spans of the complete traces kept, oldest trace first.
func (r *Recorder) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Span, 0, r.ndone)
	for _, t := range r.done {
		out = append(out, t...)
	}
	return out
}

func (r *Recorder) Shutdown(context.Context) error   { return nil }
func (r *Recorder) ForceFlush(context.Context) error { return nil }
