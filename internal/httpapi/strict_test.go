package httpapi

import (
	"errors"
	"testing"

	"github.com/shardmart/shardmart/internal/catalog"
)

// TestIntegersAsJSONSchemaReadsThem: a number without a fraction is an integer however it is
// spelt; one with a fraction, or past int64, is refused naming the field.
func TestIntegersAsJSONSchemaReadsThem(t *testing.T) {
	for lit, want := range map[string]int64{"63": 63, "63.0": 63, "6.3e1": 63, "630E-1": 63, "-0.0": 0, "1e18": 1e18, "100000000000000000000e-2": 1e18} {
		if n, err := jsonInteger(lit); err != nil || n != want {
			t.Errorf("%s: %d, %v; want %d", lit, n, err, want)
		}
	}
	for lit, want := range map[string]error{"63.5": errNotInteger, "1e-1000000": errNotInteger, "63.0000000000000000000001": errNotInteger,
		"1e400": errIntRange, "9223372036854775808": errIntRange, "-1e19": errIntRange} {
		if n, err := jsonInteger(lit); !errors.Is(err, want) {
			t.Errorf("%s: %d, %v; want %v", lit, n, err, want)
		}
	}
	e := newEnv(t)
	e.product(t, "p1", "toys", "1.00", 1)
	guest := e.guest(t)
	var cv cartView
	e.must(t, 200, req{method: "PUT", path: "/v1/cart/items/p1", token: guest, body: `{"quantity": 63.0}`}).json(t, &cv)
	if len(cv.Items) != 1 || cv.Items[0].Quantity != 63 {
		t.Fatalf("quantity 63.0: cart %+v", cv)
	}
}

// TestStockCap: no adjustment takes a zone past catalog.MaxStock (409 naming delta), and a
// product whose stock passed it anyway (a cancelled order gives its units back uncapped) still
// takes a price change: a patch is never refused naming a field it cannot send.
func TestStockCap(t *testing.T) {
	e := newEnv(t)
	e.product(t, "big", "toys", "1.00", catalog.MaxStock-1)
	stock := func(delta int64) resp {
		return e.do(t, req{method: "POST", path: "/v1/products/big/stock", admin: testAdminToken,
			body: map[string]any{"zone": "eu", "delta": delta}})
	}
	p := stock(2).problem(t)
	if p.Status != 409 || p.Type != problemBase+"stock-cap" || len(p.Errors) != 1 || p.Errors[0].Field != "delta" ||
		p.ProductID != "big" || p.Available == nil || *p.Available != catalog.MaxStock-1 {
		t.Fatalf("raise past the cap: %+v", p)
	}
	if r := stock(1); r.status != 200 {
		t.Fatalf("raise to the cap: %d %s", r.status, r.body)
	}
	// Take one unit by an order, put it back by hand, then cancel: the zone holds cap+1.
	token, _ := e.user(t)
	e.put(t, token, "big", 1)
	var o orderView
	e.placeOrder(t, token, "cap").json(t, &o)
	if r := stock(1); r.status != 200 {
		t.Fatalf("refill to the cap: %d %s", r.status, r.body)
	}
	e.must(t, 200, req{method: "POST", path: "/v1/orders/" + o.ID + "/status", admin: testAdminToken, body: map[string]string{"status": "cancelled"}})
	var pv productView
	e.must(t, 200, req{method: "PATCH", path: "/v1/products/big", admin: testAdminToken, body: map[string]string{"price": "2.00"}}).json(t, &pv)
	if pv.Price.String() != "2.00" || pv.Stock["eu"] != catalog.MaxStock+1 {
		t.Fatalf("patched product over the cap: %+v", pv)
	}
	if p := stock(1).problem(t); p.Status != 409 || p.Errors[0].Field != "delta" {
		t.Fatalf("raise while over the cap: %+v", p)
	}
	if r := stock(-2); r.status != 200 {
		t.Fatalf("take while over the cap: %d %s", r.status, r.body)
	}
}
