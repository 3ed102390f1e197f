// Package tracing is shardmart's OpenTelemetry set-up: a tracer provider that samples a ratio of
// requests, exports them over OTLP/HTTP when an endpoint is configured, and keeps the most recent
// sampled traces in memory (Recorder) so `bench` can say where a request's time went without a
// collector. Off (a nil *Tracing), nothing is wrapped: the callers holding a tracer skip their
// span code on a nil check, and those without one (Child, Wait) find no sampled span in ctx.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Span attribute keys shared by every layer, so the breakdown reads one vocabulary.
const (
	// KeyKind says which layer made the span: KindHTTP, KindService, KindStore, KindStatement,
	// KindSync or KindWait.
	KeyKind        = attribute.Key("shardmart.kind")
	KeyBackend     = attribute.Key("db.system")
	KeyOp          = attribute.Key("shardmart.op")
	KeyStatement   = attribute.Key("shardmart.statement")
	KeyConsistency = attribute.Key("db.cassandra.consistency_level")
	KeyRows        = attribute.Key("shardmart.rows")
	KeyAttempt     = attribute.Key("shardmart.attempt") // 0 first try, > 0 a driver retry
	KeyLWT         = attribute.Key("shardmart.lwt")     // a lightweight transaction (Paxos)
	KeyOutcome     = attribute.Key("shardmart.outcome")
	KeyStatus      = attribute.Key("http.response.status_code")
)

// Span kinds (KeyKind values).
const (
	KindHTTP      = "http"
	KindService   = "service"
	KindStore     = "store"
	KindStatement = "statement"
	KindSync      = "sync" // the projector's read-your-writes Sync
	KindWait      = "wait" // waiting for someone else's work (a drain, a lease)
)

// EventLWTRetry is the span event a compare-and-set loop adds to its store span per extra round.
const EventLWTRetry = "lwt.retry"

// Config turns tracing on.
type Config struct {
	// Endpoint is the OTLP/HTTP collector's base URL ("http://127.0.0.1:4318": spans go to its
	// /v1/traces) or, with a path, the full traces URL; empty exports only when
	// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
	Endpoint string
	// SampleRatio is the fraction of requests traced (0..1). A request's spans are all kept
	// or all dropped (parent-based).
	SampleRatio float64
	// RatioGiven says SampleRatio was chosen (serve: the flag was passed; 0 then means off even
	// with a collector). Otherwise OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG choose it,
	// and a collector named with neither is an error: an OTEL_EXPORTER_OTLP_ENDPOINT set for a
	// whole environment must not quietly trace every request.
	RatioGiven bool
	// Keep bounds the spans held in memory for the admin route; 0 is DefaultKeep.
	Keep int
	// Service names the process in exported traces (service.name).
	Service string
}

// DefaultKeep is enough for a few hundred requests of the shop's mix.
const DefaultKeep = 20000

// Tracing is a running provider. A nil *Tracing is tracing off.
type Tracing struct {
	provider *sdktrace.TracerProvider
	// Recent holds the last sampled traces.
	Recent *Recorder
	// Exporting says spans also leave over OTLP.
	Exporting bool
	// Ratio is the sampling ratio in force.
	Ratio float64
}

// envEndpoint reports whether the standard OTEL_* variables name a collector.
func envEndpoint() bool {
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// ratio is the sampling ratio c asks for, 0 for tracing off; see RatioGiven.
func (c Config) ratio() (float64, error) {
	if !(c.SampleRatio >= 0 && c.SampleRatio <= 1) {
		return 0, fmt.Errorf("tracing: sample ratio %v is outside 0..1", c.SampleRatio)
	}
	if c.RatioGiven || c.SampleRatio > 0 {
		return c.SampleRatio, nil
	}
	sampler, ok := os.LookupEnv("OTEL_TRACES_SAMPLER")
	if !ok {
		if c.Endpoint != "" || envEndpoint() {
			return 0, errors.New("tracing: an OTLP endpoint is set but no sampling ratio: pass --trace-sample-ratio (0 keeps tracing off) or set OTEL_TRACES_SAMPLER")
		}
		return 0, nil
	}
	switch sampler {
	case "always_on", "parentbased_always_on":
		return 1, nil
	case "always_off", "parentbased_always_off":
		return 0, nil
	case "traceidratio", "parentbased_traceidratio":
		arg, ok := os.LookupEnv("OTEL_TRACES_SAMPLER_ARG")
		if !ok {
			return 1, nil // the specification's default argument
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(r >= 0 && r <= 1) {
			return 0, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER_ARG %q is not a ratio in 0..1", arg)
		}
		return r, nil
	}
	return 0, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER %q is not supported (always_on, always_off, traceidratio and their parentbased_ forms are)", sampler)
}

// Start builds the provider; it returns nil (off) when the ratio c asks for is 0.
func Start(ctx context.Context, c Config) (*Tracing, error) {
	ratio, err := c.ratio()
	if err != nil || ratio == 0 {
		return nil, err
	}
	if c.Service == "" {
		c.Service = "shardmart"
	}
	t := &Tracing{Recent: NewRecorder(c.Keep), Ratio: ratio}
	opts := []sdktrace.TracerProviderOption{
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		sdktrace.WithSpanProcessor(t.Recent),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", c.Service))),
	}
	if c.Endpoint != "" || envEndpoint() {
		var eo []otlptracehttp.Option
		if c.Endpoint != "" {
			eo = append(eo, otlptracehttp.WithEndpointURL(tracesURL(c.Endpoint)))
		}
		exp, err := otlptracehttp.New(ctx, eo...)
		if err != nil {
			return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
		t.Exporting = true
	}
	t.provider = sdktrace.NewTracerProvider(opts...)
	return t, nil
}

// tracesURL reads an endpoint as OTEL_EXPORTER_OTLP_ENDPOINT is read, a collector's base URL:
// without a path the traces go to its /v1/traces (the exporter would post to "/").
func tracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint // a full URL, or one the exporter will refuse with its own message
	}
	u.Path = "/v1/traces"
	return u.String()
}

// Tracer is the tracer every layer uses; nil when t is nil (tracing off).
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return nil
	}
	return t.provider.Tracer(scope)
}

// Shutdown flushes the exporter; nil-safe.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// End finishes sp with err's outcome: "ok", "canceled" (context.Canceled: the caller went
// away) or "error", which also marks the span failed.
func End(sp trace.Span, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
		if errors.Is(err, context.Canceled) {
			outcome = "canceled"
		}
	}
	EndAs(sp, err, outcome)
}

// EndAs finishes sp with the caller's reading of err (a store operation's "not_found" or
// "rejected" is an answer, not a failure): only "error" marks the span failed.
func EndAs(sp trace.Span, err error, outcome string) {
	sp.SetAttributes(KeyOutcome.String(outcome))
	if outcome == "error" && err != nil {
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

// Statement records one statement or wire command that already ran, from start to end, as a
// child of ctx's span: the drivers' hooks report after the fact.
func Statement(ctx context.Context, tr trace.Tracer, backend, name string, start, end time.Time, err error, attrs ...attribute.KeyValue) {
	if !trace.SpanFromContext(ctx).SpanContext().IsSampled() {
		// Only statements of a sampled request: a background statement would be a trace of its own.
		return
	}
	_, sp := tr.Start(ctx, name, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(attrs, KeyKind.String(KindStatement), KeyBackend.String(backend), KeyStatement.String(name))...))
	if err != nil {
		sp.SetStatus(codes.Error, err.Error())
		sp.SetAttributes(KeyOutcome.String("error"))
	} else {
		sp.SetAttributes(KeyOutcome.String("ok"))
	}
	sp.End(trace.WithTimestamp(end))
}

// scope names the tracer the spans opened from a context's provider use.
const scope = "github.com/shardmart/shardmart"

// Child opens a span of kind under ctx's span, on that span's own provider, when ctx is a
// sampled request's; otherwise it returns ctx and a nil span and allocates nothing. Packages
// without a tracer of their own (the outbox) use it.
func Child(ctx context.Context, name, kind string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.SpanContext().IsSampled() {
		return ctx, nil
	}
	return parent.TracerProvider().Tracer(scope).Start(ctx, name, trace.WithAttributes(KeyKind.String(kind)))
}

// Wait opens a KindWait span (see Child) and returns the func that ends it.
func Wait(ctx context.Context, name string) (end func()) {
	_, sp := Child(ctx, name, KindWait)
	if sp == nil {
		return noop
	}
	return func() { sp.End() }
}

func noop() {}
