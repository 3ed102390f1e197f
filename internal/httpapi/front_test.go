package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestEveryErrorIsAProblem: the answers ServeMux and net/http would write themselves are
// problems too, and no path is answered with a redirect.
func TestEveryErrorIsAProblem(t *testing.T) {
	e := newEnv(t)
	e.product(t, "p1", "toys", "1.00", 1)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path string, header http.Header) resp {
		t.Helper()
		r, err := http.NewRequest(method, e.srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			r.Header[k] = v
		}
		res, err := noFollow.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return resp{status: res.StatusCode, header: res.Header, body: b}
	}
	big := http.Header{"X-Padding": {strings.Repeat("a", MaxHeaderBytes)}}
	for _, c := range []struct {
		method, path string
		header       http.Header
		status       int
	}{
		{"GET", "/v2/nothing", nil, 404},
		{"DELETE", "/v1/products", nil, 405},
		{"OPTIONS", "/v1/products/p1", nil, 405},
		// ServeMux would answer these with a redirect and an HTML body.
		{"GET", "//v1/products/p1", nil, 404},
		{"GET", "/v1/./products/p1", nil, 404},
		{"GET", "/v1/orders/../products/p1", nil, 404},
		{"POST", "/v1/products/p1/stock/..", nil, 404},
		{"GET", "/v1/products/p1/", nil, 404},
		{"GET", "/v1/products/p1", big, 431},
	} {
		name := fmt.Sprintf("%s %s", c.method, c.path)
		r := send(c.method, c.path, c.header)
		if r.status != c.status || r.header.Get("Location") != "" {
			t.Errorf("%s: %d (Location %q), want %d", name, r.status, r.header.Get("Location"), c.status)
			continue
		}
		if p := r.problem(t); p.RequestID == "" {
			t.Errorf("%s: problem without request id: %+v", name, p)
		}
	}
	// The canonical path itself is served.
	if r := send("GET", "/v1/products/p1", nil); r.status != 200 {
		t.Fatalf("canonical path: %d", r.status)
	}
	// Past net/http's own limit (1 MiB in Serve, the same default in httptest) net/http answers
	// in plain text before any handler runs, as README and the OpenAPI document say.
	huge := http.Header{"X-Padding": {strings.Repeat("a", 1<<20+8192)}}
	if r := send("GET", "/v1/products/p1", huge); r.status != 431 || strings.Contains(r.header.Get("Content-Type"), "json") {
		t.Fatalf("header past net/http's limit: %d %q", r.status, r.header.Get("Content-Type"))
	}
}
