package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestExportOverOTLP: with an endpoint, the sampled spans leave over OTLP/HTTP (protobuf POST
// to /v1/traces) by the time Shutdown returns, and are kept in memory as well. The receiving
// end is this test's own sink, decoding what a collector would.
func TestExportOverOTLP(t *testing.T) {
	var mu sync.Mutex
	var names []string
	var service string
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			t.Errorf("export: %s %s (%s), %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err)
			http.Error(w, "unexpected", http.StatusBadRequest)
			return
		}
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("decode export: %v", err)
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	defer sink.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")

	tr, err := Start(context.Background(), Config{Endpoint: sink.URL, SampleRatio: 1, Service: "shardmart-test"})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Exporting {
		t.Fatal("an endpoint given, but not exporting")
	}
	ctx, root := tr.Tracer().Start(context.Background(), "GET /v1/cart")
	_, child := Child(ctx, "carts.Get", KindService)
	child.End()
	root.End()
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown (flushes the exporter): %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(names) != 2 || service != "shardmart-test" {
		t.Errorf("the sink received spans %q of service %q, want the request and its child of shardmart-test", names, service)
	}
	if n := len(tr.Recent.Spans()); n != 2 {
		t.Errorf("%d spans kept in memory, want 2", n)
	}
}
