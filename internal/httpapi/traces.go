package httpapi

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/tracing"
)

// tracesRoute is not traced: its own spans would fill the ring it reads, and bench's next
// fetch would count them as the workload's.
const tracesRoute = "GET /v1/admin/traces"

// startRequestSpan opens the request's root span, named by its route pattern so the breakdown
// groups requests by type.
func startRequestSpan(ctx context.Context, tr trace.Tracer, route string, r *http.Request) (context.Context, trace.Span) {
	return tr.Start(ctx, route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		tracing.KeyKind.String(tracing.KindHTTP), tracing.KeyOp.String(route)))
}

// endRequestSpan records the answer: a 5xx is the server's failure, anything else an outcome.
// An aborted handler (http.ErrAbortHandler) sent no complete answer: it is "canceled".
func endRequestSpan(sp trace.Span, status int, aborted bool) {
	if status == 0 {
		status = http.StatusOK
	}
	outcome := "ok"
	switch {
	case aborted:
		outcome = "canceled"
		sp.SetStatus(codes.Error, "handler aborted")
	case status >= 500:
		outcome = "error"
		sp.SetStatus(codes.Error, http.StatusText(status))
	case status >= 400:
		outcome = "rejected"
	}
	sp.SetAttributes(tracing.KeyStatus.Int(status), tracing.KeyOutcome.String(outcome))
	sp.End()
}

// traces serves the recent sampled spans (tracing.Recorder) for `bench`'s breakdown.
func (s *server) traces(w http.ResponseWriter, _ *http.Request, _ *caller) error {
	if s.Traces == nil {
		return problem(http.StatusNotFound, "tracing-off", "Tracing is off",
			"start the server with --trace-sample-ratio above 0 to keep sampled traces")
	}
	return reply(w, http.StatusOK, map[string]any{"spans": s.Traces()})
}
