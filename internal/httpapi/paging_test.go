package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestPagination follows next_cursor through products, order history and events: every item
// exactly once, in order, and no cursor on the last page.
func TestPagination(t *testing.T) {
	e := newEnv(t)
	for i := range 7 {
		e.product(t, fmt.Sprintf("p%d", i), "books", fmt.Sprintf("%d.00", 10+i), 100)
	}
	token, _ := e.user(t)
	var orderIDs []string
	for i := range 5 {
		e.put(t, token, fmt.Sprintf("p%d", i), 1)
		var o orderView
		r := e.placeOrder(t, token, fmt.Sprintf("page-%d", i))
		r.json(t, &o)
		orderIDs = append([]string{o.ID}, orderIDs...) // newest first
		e.must(t, 201, req{method: "POST", path: "/v1/events", token: token, body: map[string]string{"type": "search"}})
	}
	collect := func(path string) []string {
		var ids []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatalf("%s: pagination does not end", path)
			}
			p := path + "&limit=2"
			if cursor != "" {
				p += "&cursor=" + url.QueryEscape(cursor)
			}
			var page listView[map[string]any]
			e.must(t, 200, req{method: "GET", path: p, token: token}).json(t, &page)
			if len(page.Items) > 2 {
				t.Fatalf("%s: page of %d", p, len(page.Items))
			}
			for _, it := range page.Items {
				ids = append(ids, it["id"].(string))
			}
			if page.NextCursor == "" {
				return ids
			}
			cursor = page.NextCursor
		}
	}
	if got := strings.Join(collect("/v1/products?category=books"), ","); got != "p0,p1,p2,p3,p4,p5,p6" {
		t.Fatalf("products: %s", got)
	}
	if got, want := strings.Join(collect("/v1/orders?x=1"), ","), strings.Join(orderIDs, ","); got != want {
		t.Fatalf("history: %s, want %s", got, want)
	}
	if got := collect("/v1/events?date=" + time.Now().UTC().Format(time.DateOnly)); len(got) != 5 {
		t.Fatalf("events: %v", got)
	}
}

// TestGuestCartExpiresWithSession: the guest cart's expiry is the session's.
func TestGuestCartExpiresWithSession(t *testing.T) {
	e := newEnv(t)
	e.product(t, "p1", "toys", "1.00", 1)
	var s sessionResponse
	e.must(t, 201, req{method: "POST", path: "/v1/sessions"}).json(t, &s)
	var cv cartView
	e.put(t, s.Token, "p1", 1).json(t, &cv)
	if cv.ExpiresAt == nil || !cv.ExpiresAt.Equal(s.ExpiresAt) {
		t.Fatalf("guest cart expires %v, session %v", cv.ExpiresAt, s.ExpiresAt)
	}
}

// TestRequestLog: one structured line per request with method, route, status, duration and
// the request id the client saw.
func TestRequestLog(t *testing.T) {
	e := newEnv(t)
	var buf bytes.Buffer
	h := New(Deps{Services: e.services, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/products/none", nil))
	var line map[string]any
	for l := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		_ = json.Unmarshal([]byte(l), &line)
	}
	if line["msg"] != "request" || line["method"] != "GET" || line["route"] != "GET /v1/products/{id}" ||
		line["status"] != float64(404) || line["duration"] == nil || line["request_id"] != rec.Header().Get("X-Request-Id") {
		t.Fatalf("log line %v", line)
	}
}
