package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/paging"
)

// productPage is a search answer as the demo data makes them: 20 products with attributes
// and stock in three zones.
func productPage() listView[productView] {
	var page paging.Page[catalog.Product]
	at := time.Date(2026, 11, 29, 1, 2, 3, 456789000, time.UTC)
	for i := range 20 {
		page.Items = append(page.Items, catalog.Product{ID: fmt.Sprintf("books-%05d", i), Name: fmt.Sprintf("Book <%d> & more", i),
			Description: "A \"quoted\" description\twith\u2028odd runes and é", Category: "books", Price: money.Amount(1999 + 100*int64(i)),
			Attributes: map[string]string{"colour": "red", "size": "M", "brand": "Acme"},
			Stock:      map[string]int64{"eu-west": 12, "us-east": 0, "ap-south": int64(i)}, CreatedAt: at, UpdatedAt: at.Add(time.Duration(i) * time.Second)})
	}
	page.Next = "opaque-cursor"
	return listOf(page, viewProduct)
}

// TestWriteJSONIsEncodingJSONs: the answer's bytes are encoding/json's (HTML characters not
// escaped, map keys sorted, a trailing newline), for a product page, an order and a problem.
func TestWriteJSONIsEncodingJSONs(t *testing.T) {
	empty := viewProduct(catalog.Product{ID: "x"})
	for name, v := range map[string]any{"product page": productPage(), "empty product": empty,
		"empty list": listOf(paging.Page[catalog.Product]{}, viewProduct),
		"map":        map[string]any{"b": 1, "a": []string{"<", ">"}, "c": nil, "d": 1.5}} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		writeJSON(rec, 200, v)
		if got := rec.Body.String(); got != want.String() {
			t.Errorf("%s:\ngot  %s\nwant %s", name, got, want.String())
		}
	}
}

// BenchmarkWriteJSONProductPage: one search answer's encoding.
func BenchmarkWriteJSONProductPage(b *testing.B) {
	v := productPage()
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		writeJSON(rec, 200, v)
	}
}
