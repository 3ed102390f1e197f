package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

// Baselines for the HTTP layer: each real route against a bare net/http handler that writes
// the bytes the real one answered (captured once per request), under the same requests,
// alternating in blocks (storetest.BenchBlocks). Two drives: "loopback" sends both through the
// same http.Client over TCP to an httptest.Server each; "direct" calls ServeHTTP with an
// httptest recorder, so no network or client cost dilutes the handler's own. overhead = real
// handler cost / bare handler cost. Numbers: docs/evidence/benchmarks.md, "Baselines".
//
//	go test ./internal/httpapi -run '^$' -bench Baseline -benchtime 20000x -count 3

// baselineReq is one request of a workload: a path with its query, and a bearer token.
type baselineReq struct{ path, token string }

func (q baselineReq) auth() string {
	if q.token == "" {
		return ""
	}
	return "Bearer " + q.token
}

func (q baselineReq) key() string { return q.path + "\x00" + q.auth() }

// new builds the request for a server (base is its URL: a client request) or for ServeHTTP
// (base "": a server-side request).
func (q baselineReq) new(base string) *http.Request {
	var r *http.Request
	if base == "" {
		r = httptest.NewRequest("GET", q.path, nil)
	} else {
		r, _ = http.NewRequest("GET", base+q.path, nil)
	}
	if a := q.auth(); a != "" {
		r.Header.Set("Authorization", a)
	}
	return r
}

func BenchmarkBaselineHTTP(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	now := time.Now().UTC()
	// The SQLite benchmark's catalog shape: 2 attributes and 2 zones per product; prices spread
	// over 1.00–100.00, so a 30.00-wide window holds about 150 of a category's products.
	const categories, perCategory = 10, 500
	for c := range categories {
		for i := range perCategory {
			if err := e.stores.Products.CreateProduct(ctx, catalog.Product{ID: fmt.Sprintf("c%d-p%d", c, i), Name: fmt.Sprintf("Product %d-%d", c, i),
				Category: fmt.Sprintf("cat-%d", c), Price: money.Amount(100 + (i*199)%9900),
				Attributes: map[string]string{"color": "red", "brand": "acme"}, Stock: map[string]int64{"eu": catalog.MaxStock, "us": 100},
				CreatedAt: now, UpdatedAt: now}); err != nil {
				b.Fatal(err)
			}
		}
	}
	var product, search, carts []baselineReq
	for i := range 100 {
		product = append(product, baselineReq{path: fmt.Sprintf("/v1/products/c%d-p%d", i%categories, i*37%perCategory)})
	}
	for i := range 50 {
		lo := 10 + i
		search = append(search, baselineReq{path: fmt.Sprintf("/v1/products?category=cat-%d&min_price=%d.00&max_price=%d.00&limit=20", i%categories, lo, lo+30)})
	}
	for i := range 64 {
		token, s := benchSession(b, e, "")
		for k := range 3 {
			if _, err := e.stores.Carts.PutItem(ctx, cart.Guest(s.ID), cart.Item{ProductID: fmt.Sprintf("c0-p%d", (i+k*7)%perCategory),
				Category: "cat-0", Quantity: 1 + int64(k), AddedAt: now}, now.Add(time.Hour), now); err != nil {
				b.Fatal(err)
			}
		}
		carts = append(carts, baselineReq{path: "/v1/cart", token: token})
	}

	// Capture each request's real answer once; the bare handler serves it by request.
	real := e.srv.Config.Handler
	bodies := map[string][]byte{}
	for _, qs := range [][]baselineReq{product, search, carts} {
		for _, q := range qs {
			rec := httptest.NewRecorder()
			real.ServeHTTP(rec, q.new(""))
			if rec.Code != http.StatusOK {
				b.Fatalf("GET %s: %d %s", q.path, rec.Code, rec.Body)
			}
			bodies[q.key()] = rec.Body.Bytes()
			if bytes.HasPrefix(rec.Body.Bytes(), []byte(`{"items":[]`)) {
				b.Fatalf("GET %s: an empty page", q.path)
			}
		}
	}
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := bodies[r.URL.RequestURI()+"\x00"+r.Header.Get("Authorization")]
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	bareSrv := httptest.NewServer(bare)
	b.Cleanup(bareSrv.Close)

	// loopback: one http.Client, a real and a bare server, the body read to the end.
	viaClient := func(base string, qs []baselineReq) storetest.PairOp {
		return func(_ context.Context, i int64) error {
			res, err := e.client.Do(qs[i%int64(len(qs))].new(base))
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if err == nil && res.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", res.StatusCode)
			}
			return err
		}
	}
	direct := func(h http.Handler, qs []baselineReq) storetest.PairOp {
		return func(_ context.Context, i int64) error {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, qs[i%int64(len(qs))].new(""))
			if rec.Code != http.StatusOK || rec.Body.Len() == 0 {
				return fmt.Errorf("status %d, %d bytes", rec.Code, rec.Body.Len())
			}
			return nil
		}
	}
	same := func(_ int, i int64) int64 { return i }
	for _, w := range []struct {
		name string
		qs   []baselineReq
	}{{"product", product}, {"search", search}, {"cart", carts}} {
		b.Run(w.name+"/loopback", func(b *testing.B) {
			storetest.BenchBlocks(b, 2*benchParallelism, 8, viaClient(e.srv.URL, w.qs), viaClient(bareSrv.URL, w.qs), same)
		})
		b.Run(w.name+"/direct", func(b *testing.B) {
			storetest.BenchBlocks(b, 2*benchParallelism, 8, direct(real, w.qs), direct(bare, w.qs), same)
		})
	}
}
