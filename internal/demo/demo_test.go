package demo_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/demo"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/shop"
)

func TestSeedIsSkewedAndConsistent(t *testing.T) {
	account.HashCost = bcrypt.MinCost
	ctx := context.Background()
	s, err := shop.Open(ctx, shop.Config{Placement: placement.Embedded(),
		Backends: placement.Options{SQLitePath: filepath.Join(t.TempDir(), "demo.db")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opt := demo.Defaults()
	opt.Products, opt.Users = 1000, 30
	res, err := demo.Seed(ctx, s.Stores, s.Orders, s.Carts, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Password) < 20 || res.Password == "demo-password" {
		t.Fatalf("demo password %q: want a random one, not a published default", res.Password)
	}
	if _, err := account.Authenticate(ctx, s.Stores.Users, "demo-0@example.com", "demo-password"); !errors.Is(err, account.ErrBadCredentials) {
		t.Errorf("the old published password still logs in: %v", err)
	}
	if res.Products != 1000 || len(res.Categories) != opt.Categories || res.Users != 30 || res.Orders == 0 || res.Events == 0 {
		t.Fatalf("seeded %+v", res)
	}
	largest, smallest := 0, 1<<30
	for _, n := range res.Categories {
		largest, smallest = max(largest, n), min(smallest, n)
	}
	if largest < 5*smallest {
		t.Errorf("category sizes %d..%d: want a skew of at least 5x", smallest, largest)
	}
	if _, err := s.Projector.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	orders := 0
	for i := 0; i < opt.Users; i++ {
		u, err := account.Authenticate(ctx, s.Stores.Users, fmt.Sprintf("demo-%d@example.com", i), res.Password)
		if err != nil {
			t.Fatalf("demo user %d cannot log in: %v", i, err)
		}
		page, err := s.Stores.History.ListHistory(ctx, u.ID, paging.Request{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		orders += len(page.Items)
	}
	if orders != res.Orders {
		t.Errorf("history holds %d orders, seed placed %d", orders, res.Orders)
	}
	if lag, _ := s.Projector.Lag(ctx); lag != 0 {
		t.Errorf("projector lag %d after drain", lag)
	}
}
