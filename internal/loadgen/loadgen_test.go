package loadgen_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/loadgen"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/shop"
)

// TestEveryScenarioRunsCleanly runs each workload briefly against a real API on a temp store:
// every measured request must succeed, so the bench command's numbers are of working requests.
func TestEveryScenarioRunsCleanly(t *testing.T) {
	account.HashCost = bcrypt.MinCost
	ctx := context.Background()
	s, err := shop.Open(ctx, shop.Config{Backends: placement.Options{SQLitePath: filepath.Join(t.TempDir(), "l.db")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opt := demo.Defaults()
	opt.Products, opt.Users = 500, 2
	if _, err := demo.Seed(ctx, s.Stores, s.Orders, s.Carts, opt); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Services: s.API(), AdminToken: "x"}))
	defer srv.Close()
	cats := []string{"electronics", "books"}
	products, err := loadgen.DiscoverProducts(ctx, srv.Client(), srv.URL, cats, 60)
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range loadgen.Scenarios {
		res, err := loadgen.Run(ctx, loadgen.Config{BaseURL: srv.URL, Concurrency: 2, Duration: 300 * time.Millisecond,
			Products: products, Categories: cats, Zone: "eu-west", AdminToken: "x"}, sc)
		if err != nil {
			t.Fatalf("%s: %v", sc, err)
		}
		if res.Requests == 0 || res.Errors != 0 || res.P99 < res.P50 {
			t.Errorf("%s: %d requests, %d errors (first: %s), p50 %s p99 %s", sc, res.Requests, res.Errors, res.FirstFail, res.P50, res.P99)
		}
	}
}
