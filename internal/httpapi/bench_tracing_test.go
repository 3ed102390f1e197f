package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/store/storetest"
	"github.com/shardmart/shardmart/internal/tracing"
)

// BenchmarkTracingCost: the same requests against two servers on their own embedded stores,
// one without tracing ("off": what serve runs without --trace-sample-ratio) and one with it
// as the sub-benchmark names, in alternating blocks (storetest.BenchVersus), called through
// ServeHTTP so that no network or client cost dilutes the difference. speedup = traced ops/s
// over untraced: 1 is free, 0.9 a tenth slower. "noop" runs every instrumented path with a
// tracer that records nothing (what a provider that samples nothing costs per call site);
// "off" is both sides untraced, the harness's own reading of two equal servers.
// Numbers: docs/evidence/benchmarks.md, "Tracing".
//
//	go test ./internal/httpapi -run '^$' -bench TracingCost -benchtime 20000x -count 3
func BenchmarkTracingCost(b *testing.B) {
	for _, v := range tracingVariants() {
		for _, route := range []string{"get-cart", "put-cart-item"} {
			b.Run(v.name+"/"+route, func(b *testing.B) {
				traced := benchRoute(b, route, v.tracer(b))
				off := benchRoute(b, route, nil)
				storetest.BenchVersus(b, 2, [2]string{"traced", "off"}, [2]storetest.PairOp{traced, off})
			})
		}
	}
}

// BenchmarkTracingPath: the same servers one request at a time, for allocs/op, which a loaded
// machine does not blur: "off" must allocate what the code before tracing did (the same
// benchmark without a tracer on that code).
//
//	go test ./internal/httpapi -run '^$' -bench TracingPath -benchtime 5000x
func BenchmarkTracingPath(b *testing.B) {
	for _, v := range tracingVariants() {
		for _, route := range []string{"get-cart", "put-cart-item"} {
			b.Run(v.name+"/"+route, func(b *testing.B) {
				op := benchRoute(b, route, v.tracer(b))
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if err := op(ctx, int64(i)); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

type tracingVariant struct {
	name   string
	tracer func(testing.TB) trace.Tracer
}

func tracingVariants() []tracingVariant {
	sdk := func(ratio float64) func(testing.TB) trace.Tracer {
		return func(tb testing.TB) trace.Tracer {
			tr, err := tracing.Start(context.Background(), tracing.Config{SampleRatio: ratio})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
			return tr.Tracer()
		}
	}
	return []tracingVariant{
		// Both sides untraced: how far from 1 the harness itself reads (two stores, block order).
		{"off", func(testing.TB) trace.Tracer { return nil }},
		{"noop", func(testing.TB) trace.Tracer { return noop.NewTracerProvider().Tracer("") }},
		{"ratio-0.01", sdk(0.01)},
		{"ratio-1", sdk(1)},
	}
}

// benchRoute is one server (traced when tr is set) and the operation sending it route's
// requests: "get-cart" is the session lookup and the active-cart read over 256 guests,
// "put-cart-item" a cart edit of 256 users over 3 of 50 products each.
func benchRoute(b *testing.B, route string, tr trace.Tracer) storetest.PairOp {
	var traces func() []tracing.Span
	e := newEnvOpts(b, placement.Options{Tracer: tr}, func(d *Deps) { d.Tracer, d.Traces = tr, traces })
	benchProducts(b, e, 1, 50)
	tokens := make([]string, 256)
	for i := range tokens {
		tokens[i], _ = benchSession(b, e, fmt.Sprintf("user-%d", i))
	}
	h := e.srv.Config.Handler
	return func(_ context.Context, k int64) error {
		u := int(k % int64(len(tokens)))
		var r *http.Request
		if route == "get-cart" {
			r = httptest.NewRequest("GET", "/v1/cart", nil)
		} else {
			r = httptest.NewRequest("PUT", fmt.Sprintf("/v1/cart/items/c0-p%d", (u*3+int(k/256)%3)%50),
				strings.NewReader(fmt.Sprintf(`{"quantity":%d}`, 1+k%9)))
			r.Header.Set("Content-Type", "application/json")
		}
		r.Header.Set("Authorization", "Bearer "+tokens[u])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			return fmt.Errorf("%s %s: %d %s", r.Method, r.URL, w.Code, w.Body)
		}
		return nil
	}
}
