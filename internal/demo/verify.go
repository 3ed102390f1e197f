package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/placement"
)

// Verify checks that what Seed reported is all readable where the API reads it: every
// category's products through the catalog (the read model, on a placement that has one, so
// the projector must have run), every user, every order in the users' histories and every
// event. It is how the tests prove a batched seed complete on each backend.
func Verify(ctx context.Context, s *placement.Stores, opt Options, res Result) error {
	var errs []error
	products := 0
	for k := 0; k < opt.Categories; k++ {
		cat := categoryNames[k]
		n, err := countPages(ctx, func(p paging.Request) (int, string, error) {
			page, err := s.Catalog.SearchProducts(ctx, catalog.Search{Category: cat, Page: p})
			return len(page.Items), page.Next, err
		})
		if err != nil {
			return fmt.Errorf("demo: search %s: %w", cat, err)
		}
		if n != res.Categories[cat] {
			errs = append(errs, fmt.Errorf("category %s: %d products readable, %d seeded", cat, n, res.Categories[cat]))
		}
		products += n
	}
	if products != res.Products {
		errs = append(errs, fmt.Errorf("%d products readable, %d seeded", products, res.Products))
	}
	orders, events := 0, 0
	for i := 0; i < opt.Users; i++ {
		u, err := s.Users.UserByEmail(ctx, fmt.Sprintf("demo-%d@example.com", i))
		if err != nil {
			errs = append(errs, fmt.Errorf("user %d: %w", i, err))
			continue
		}
		n, err := countPages(ctx, func(p paging.Request) (int, string, error) {
			page, err := s.History.ListHistory(ctx, u.ID, p)
			return len(page.Items), page.Next, err
		})
		if err != nil {
			return fmt.Errorf("demo: history of %s: %w", u.ID, err)
		}
		orders += n
		// Events fall in the last 24 hours: today and yesterday (UTC).
		for _, day := range []time.Time{time.Now().UTC(), time.Now().UTC().Add(-24 * time.Hour)} {
			n, err := countPages(ctx, func(p paging.Request) (int, string, error) {
				page, err := s.Events.ListEvents(ctx, event.Query{Actor: cart.User(u.ID).Key(), Day: day, Page: p})
				return len(page.Items), page.Next, err
			})
			if err != nil {
				return fmt.Errorf("demo: events of %s: %w", u.ID, err)
			}
			events += n
		}
	}
	if orders != res.Orders {
		errs = append(errs, fmt.Errorf("%d orders in the histories, %d placed", orders, res.Orders))
	}
	if events != res.Events {
		errs = append(errs, fmt.Errorf("%d events readable, %d appended", events, res.Events))
	}
	return errors.Join(errs...)
}

// countPages follows a paginated listing to its end.
func countPages(ctx context.Context, list func(paging.Request) (int, string, error)) (int, error) {
	total := 0
	req := paging.Request{Limit: 100}
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, next, err := list(req)
		if err != nil {
			return total, err
		}
		total += n
		if next == "" {
			return total, nil
		}
		req.Cursor = next
	}
}
