package cassandrastore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/shop"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// TestHybridPlacementShoppingFlow runs the README's shopping flow through HTTP on the hybrid
// placement (orders, products and users embedded; carts, sessions, events, history and the
// catalog read model on the real Cassandra node): search through the projector-fed read
// model, a guest cart, login with the merge and a new token, an order, the history.
func TestHybridPlacementShoppingFlow(t *testing.T) {
	hosts, ks := cassandrastore.ClusterForTest(t)
	cfg := allOnCassandraConfig(t)
	ctx := context.Background()
	s, err := shop.Open(ctx, shop.Config{Placement: cfg, Logger: slog.New(slog.DiscardHandler),
		Backends: placement.Options{SQLitePath: filepath.Join(t.TempDir(), "orders.db"), CassandraHosts: hosts, CassandraKeyspace: ks}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	const admin = "hybrid-flow-admin-token-0123456789"
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Services: s.API(), AdminToken: admin, Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)

	call := func(method, path, token, body string, want int, into any) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set(httpapi.AdminTokenHeader, admin)
		req.Header.Set(httpapi.IdempotencyKeyHeader, "hybrid-order-1")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, res.StatusCode, b, want)
		}
		if into != nil {
			if err := json.Unmarshal(b, into); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
		}
	}
	cat := "hybrid" + time.Now().Format("150405")
	call("POST", "/v1/products", "", `{"id":"`+cat+`-mug","name":"Mug","category":"`+cat+`","price":"12.50","stock":{"eu-west":10}}`, 201, nil)
	call("POST", "/v1/products", "", `{"id":"`+cat+`-pan","name":"Pan","category":"`+cat+`","price":"30.00","stock":{"eu-west":5}}`, 201, nil)
	if err := s.Projector.Sync(ctx); err != nil { // the read model follows the store of record
		t.Fatal(err)
	}
	var search struct{ Items []struct{ ID string } }
	call("GET", "/v1/products?category="+cat+"&min_price=10&max_price=40&limit=20", "", "", 200, &search)
	if len(search.Items) != 2 {
		t.Fatalf("search in the Cassandra read model found %d products, want 2", len(search.Items))
	}
	var sess struct{ Token string }
	call("POST", "/v1/sessions", "", "", 201, &sess)
	call("PUT", "/v1/cart/items/"+cat+"-mug", sess.Token, `{"quantity":2}`, 200, nil)
	call("PUT", "/v1/cart/items/"+cat+"-pan", sess.Token, `{"quantity":1}`, 200, nil)
	email := cat + "@example.com"
	call("POST", "/v1/users", sess.Token, `{"email":"`+email+`","password":"correct horse"}`, 201, nil)
	var login struct {
		Token string
		Cart  struct{ Items []struct{} }
	}
	call("POST", "/v1/login", sess.Token, `{"email":"`+email+`","password":"correct horse"}`, 200, &login)
	if len(login.Cart.Items) != 2 || login.Token == "" {
		t.Fatalf("login: %d lines merged, token %q; want 2 and a new token", len(login.Cart.Items), login.Token)
	}
	call("GET", "/v1/cart", sess.Token, "", 401, nil)
	var ord struct{ ID, Total string }
	call("POST", "/v1/orders", login.Token, `{"zone":"eu-west"}`, 201, &ord)
	if ord.Total != "55.00" {
		t.Errorf("order total %s, want 55.00", ord.Total)
	}
	var hist struct{ Items []struct{ ID string } }
	call("GET", "/v1/orders?limit=10", login.Token, "", 200, &hist)
	if len(hist.Items) != 1 || hist.Items[0].ID != ord.ID {
		t.Errorf("history in Cassandra: %+v, want order %s", hist.Items, ord.ID)
	}
	var cartAfter struct{ Items []struct{} }
	call("GET", "/v1/cart", login.Token, "", 200, &cartAfter)
	if len(cartAfter.Items) != 0 {
		t.Errorf("cart after ordering holds %d lines, want a fresh empty cart", len(cartAfter.Items))
	}
}
