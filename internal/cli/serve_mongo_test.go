package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

// TestServeShoppingFlowOnMongoReplicaSet runs `serve` with every family placed on a real mongod
// 6.0.5 replica set (the URI `mongo up` prints) and walks the README's shopping flow through
// HTTP: products, guest cart, register, login with merge, idempotent order, history, status.
func TestServeShoppingFlowOnMongoReplicaSet(t *testing.T) {
	set := launcher.ForTest(t, launcher.Options{Members: 1, BasePort: launcher.ServeTestPort})
	var o serveOptions
	o.backend.register(&cobra.Command{})
	o.backend.dataDir = t.TempDir()
	o.backend.mongoURI = set.URI()
	o.backend.placement = "orders=mongo,products=mongo,carts=mongo,sessions=mongo,events=mongo,history=mongo,catalog=mongo"
	o.addr, o.seed, o.logFormat, o.adminToken = "127.0.0.1:0", false, "text", "flow-admin-token"
	o.shutdownTimeout, o.purgeEvery = 10*time.Second, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	var logs bytes.Buffer
	errc := make(chan error, 1)
	go func() { errc <- runServe(ctx, IO{Out: io.Discard, Err: &logs}, o, ready) }()
	var api string
	select {
	case addr := <-ready:
		api = "http://" + addr
	case err := <-errc:
		t.Fatalf("serve failed: %v\n%s", err, logs.String())
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not start")
	}
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()

	c := flowClient{t: t, api: api, admin: o.adminToken}
	c.do("POST", "/v1/products", "", `{"id":"mug","name":"Mug","category":"kitchen","price":"12.50","stock":{"eu-west":10}}`, 201, nil)
	c.do("POST", "/v1/products", "", `{"id":"pan","name":"Pan","category":"kitchen","price":"30.00","stock":{"eu-west":5}}`, 201, nil)
	var sess struct{ Token string }
	c.do("POST", "/v1/sessions", "", "", 201, &sess)
	var search struct{ Items []struct{ ID string } }
	c.do("GET", "/v1/products?category=kitchen&min_price=10&max_price=40&limit=20", "", "", 200, &search)
	if len(search.Items) != 2 {
		t.Errorf("search found %d products, want 2", len(search.Items))
	}
	c.do("PUT", "/v1/cart/items/mug", sess.Token, `{"quantity":2}`, 200, nil)
	c.do("PUT", "/v1/cart/items/pan", sess.Token, `{"quantity":1}`, 200, nil)
	c.do("POST", "/v1/users", sess.Token, `{"email":"ann@example.com","password":"correct horse"}`, 201, nil)
	var login struct {
		Token string
		Cart  struct {
			Items []struct {
				ProductID string `json:"product_id"`
			}
		}
	}
	c.do("POST", "/v1/login", sess.Token, `{"email":"ann@example.com","password":"correct horse"}`, 200, &login)
	if len(login.Cart.Items) != 2 {
		t.Errorf("after login the cart has %d lines, want the 2 guest lines merged", len(login.Cart.Items))
	}
	c.do("GET", "/v1/cart", sess.Token, "", 401, nil) // the guest token was revoked
	sess.Token = login.Token
	var ord struct {
		ID     string
		Status string
		Total  string
	}
	c.idem = "flow-order-1"
	c.do("POST", "/v1/orders", sess.Token, `{"zone":"eu-west"}`, 201, &ord)
	replay := c.do("POST", "/v1/orders", sess.Token, `{"zone":"eu-west"}`, 200, nil)
	if replay.Get("Idempotency-Replayed") != "true" {
		t.Errorf("retry with the same key: headers %v, want a replay", replay)
	}
	c.idem = ""
	if ord.Total != "55.00" {
		t.Errorf("order total %s, want 55.00 (2×12.50 + 30.00)", ord.Total)
	}
	var hist struct{ Items []struct{ ID string } }
	c.do("GET", "/v1/orders?limit=10", sess.Token, "", 200, &hist)
	if len(hist.Items) != 1 || hist.Items[0].ID != ord.ID {
		t.Errorf("history %+v, want exactly order %s", hist.Items, ord.ID)
	}
	var prod struct{ Stock map[string]int64 }
	c.do("GET", "/v1/products/mug", "", "", 200, &prod)
	if prod.Stock["eu-west"] != 8 {
		t.Errorf("mug stock %d after ordering 2 of 10, want 8", prod.Stock["eu-west"])
	}
	c.do("POST", "/v1/orders/"+ord.ID+"/status", "", `{"status":"paid"}`, 200, nil)
	c.do("POST", "/v1/orders/"+ord.ID+"/status", "", `{"status":"created"}`, 409, nil)

	// /metrics has the read routing's series: the history read counted (a 1-member set has no
	// secondary: the primary), the member's lag and the set's oplog window (read at start).
	resp, err := http.Get(api + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{
		`shardmart_read_routing_reads_total{budget_seconds="10",family="orders",op="orders.history",outcome="primary_no_fresh_member"} 1`,
		`shardmart_mongo_member_lag_seconds{member="` + set.Hosts()[0] + `",set="` + set.Name() + `"}`,
		`shardmart_mongo_oplog_window_seconds{set="` + set.Name() + `"}`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// The placed backend goes away: /readyz names it within its short timeout; /healthz is
	// liveness and stays 200.
	c.do("GET", "/readyz", "", "", 200, nil)
	if err := set.Kill(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	var notReady struct{ Detail string }
	c.do("GET", "/readyz", "", "", 503, &notReady)
	if !strings.Contains(notReady.Detail, "mongo") {
		t.Errorf("readyz with mongod down: detail %q, want it to name mongo", notReady.Detail)
	}
	c.do("GET", "/healthz", "", "", 200, nil)
}

type flowClient struct {
	t     *testing.T
	api   string
	admin string
	idem  string
}

// do sends one request and checks its status; admin routes get the admin token.
func (c flowClient) do(method, path, token, body string, want int, into any) http.Header {
	c.t.Helper()
	status, b, h, err := c.send(method, path, token, body, c.idem)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	if status != want {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, status, b, want)
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return h
}

// send sends one request and returns the answer, failing nothing (safe from any goroutine).
func (c flowClient) send(method, path, token, body, idem string) (int, []byte, http.Header, error) {
	req, err := http.NewRequest(method, c.api+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	req.Header.Set("X-Admin-Token", c.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}
