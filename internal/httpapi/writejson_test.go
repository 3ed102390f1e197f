package httpapi

import (
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

// TestWriteJSONBytes: an answer's exact bytes: HTML characters as they are, U+2028 escaped,
// map keys sorted, money as a decimal string, an empty map as {}, no next_cursor on the last
// page, and a trailing newline.
func TestWriteJSONBytes(t *testing.T) {
	at := time.Date(2026, 11, 29, 1, 2, 3, 456789000, time.UTC)
	p := catalog.Product{ID: "books-00001", Name: "Book <1> & more", Description: "a\u2028b", Category: "books",
		Price: money.Amount(1999), Stock: map[string]int64{"us-east": 0, "eu-west": 12}, CreatedAt: at, UpdatedAt: at}
	for _, c := range []struct {
		v    any
		want string
	}{
		{listOf(paging.Page[catalog.Product]{Items: []catalog.Product{p}}, viewProduct),
			`{"items":[{"id":"books-00001","name":"Book <1> & more","description":"a\u2028b","active":true,"category":"books",` +
				`"price":"19.99","attributes":{},"stock":{"eu-west":12,"us-east":0},` +
				`"created_at":"2026-11-29T01:02:03.456789Z","updated_at":"2026-11-29T01:02:03.456789Z"}]}` + "\n"},
		{listOf(paging.Page[catalog.Product]{Next: "c"}, viewProduct), `{"items":[],"next_cursor":"c"}` + "\n"},
	} {
		rec := httptest.NewRecorder()
		writeJSON(rec, 200, c.v)
		if got := rec.Body.String(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
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
