package tracing

import (
	"cmp"
	"context"
	"slices"
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
	pending  map[string]*pendingTrace // by trace id, until the root ends
	npending int
	// closed holds the ids of the traces lately finished or dropped, oldest first, at most
	// closedCap: a child ending after its root (a goroutine the request left running) is
	// dropped instead of waiting in pending for a root that has come and gone.
	closed    map[string]struct{}
	closedIDs []string
	arrivals  uint64
	done      [][]Span // complete traces, oldest first
	ndone     int
}

type pendingTrace struct {
	first uint64 // the order its first span ended here in (Recorder.arrivals)
	spans []Span
}

// closedCap bounds the finished trace ids remembered; a later child of an older trace waits
// in pending until the overflow below drops it.
const closedCap = 4096

var _ sdktrace.SpanProcessor = (*Recorder)(nil)

// NewRecorder keeps at most keep spans (0: DefaultKeep).
func NewRecorder(keep int) *Recorder {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Recorder{keep: keep, pending: map[string]*pendingTrace{}, closed: map[string]struct{}{}}
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
	if _, ok := r.closed[sp.TraceID]; ok {
		return // a late child of a trace already finished, or of one dropped incomplete
	}
	p := r.pending[sp.TraceID]
	if !root {
		if p == nil {
			r.arrivals++
			p = &pendingTrace{first: r.arrivals}
			r.pending[sp.TraceID] = p
		}
		p.spans = append(p.spans, sp)
		r.npending++
		if r.npending > r.keep {
			r.expirePending()
		}
		return
	}
	var trace []Span
	if p != nil {
		trace = p.spans
		r.npending -= len(trace)
		delete(r.pending, sp.TraceID)
	}
	r.close(sp.TraceID)
	trace = append(trace, sp)
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

// expirePending drops the traces waiting longest until a quarter of the bound is free: a root
// that never ends (a leak) must not grow memory, and the requests in flight, younger, stay.
func (r *Recorder) expirePending() {
	ids := make([]string, 0, len(r.pending))
	for id := range r.pending {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(r.pending[a].first, r.pending[b].first) })
	for _, id := range ids {
		if r.npending <= r.keep*3/4 {
			return
		}
		r.npending -= len(r.pending[id].spans)
		delete(r.pending, id)
		r.close(id)
	}
}

// close remembers id as finished, forgetting the oldest beyond closedCap.
func (r *Recorder) close(id string) {
	if len(r.closedIDs) >= closedCap {
		delete(r.closed, r.closedIDs[0])
		r.closedIDs = r.closedIDs[1:]
	}
	r.closed[id] = struct{}{}
	r.closedIDs = append(r.closedIDs, id)
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
