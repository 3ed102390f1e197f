// Package demo generates realistic shop data: thousands of products over categories of skewed
// sizes (a few huge, many small, like a real catalog, with the hot categories that make a
// shard key on category alone skew), stock in several zones, users, carts, orders and click
// events. It goes through the same services the API uses, so demo data obeys every invariant.
package demo

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/placement"
)

// Options size the data set.
type Options struct {
	Products   int
	Categories int
	Users      int
	Seed       uint64
	// Password is every demo user's password (they are demo-0@example.com ... demo-N@...).
	// Empty: a random one, returned in Result.Password — a published default would open every
	// demo account of every install.
	Password string
	Progress io.Writer
	// OnProgress, if set, is told how far seeding is: the stage ("products", "users") and the
	// count done of its total. It may be called from several goroutines at once.
	OnProgress func(stage string, done, total int)
	// OneByOne writes each product in its own transaction and each user's data in turn, as
	// seeding did before it was batched: the baseline docs/evidence/benchmarks.md compares against.
	OneByOne bool
	// Workers is how many users are seeded at once (default 16).
	Workers int
}

// productChunk is how many products one CreateProducts call writes: big enough that a
// transaction's fixed cost vanishes, small enough for any backend's transaction limits.
const productChunk = 500

// Defaults are big enough to show skew and pagination, small enough to seed in seconds.
func Defaults() Options {
	return Options{Products: 5000, Categories: 20, Users: 200, Seed: 1}
}

// Zones where stock is kept.
var Zones = []string{"eu-west", "us-east", "ap-south"}

var categoryNames = []string{"electronics", "books", "clothing", "home", "toys", "sports", "beauty",
	"grocery", "garden", "automotive", "music", "movies", "office", "pets", "baby", "health",
	"jewelry", "tools", "games", "crafts", "shoes", "watches", "luggage", "software", "outdoor"}

var adjectives = []string{"Classic", "Smart", "Compact", "Deluxe", "Eco", "Ultra", "Vintage", "Pro", "Mini", "Travel"}
var nouns = []string{"Lamp", "Kettle", "Backpack", "Speaker", "Notebook", "Jacket", "Puzzle", "Bottle", "Charger", "Chair"}

// Result counts what was generated.
type Result struct {
	Products, Users, Carts, Orders, Events int
	Categories                             map[string]int
	// Password is the demo users' password, for the caller to tell the operator once.
	Password string
}

// Seed writes the data set through stores and services. It is not idempotent: run it on an
// empty store (serve checks the outbox is empty first).
func Seed(ctx context.Context, s *placement.Stores, orders *order.Service, carts *cart.Service, opt Options) (Result, error) {
	if opt.Categories < 1 || opt.Categories > len(categoryNames) {
		return Result{}, fmt.Errorf("demo: categories must be 1..%d", len(categoryNames))
	}
	if opt.Products < opt.Categories || opt.Users < 0 {
		return Result{}, fmt.Errorf("demo: need at least one product per category and users >= 0")
	}
	// A user's open cart is filled right after their orders: each order waits for its follow-ups
	// (the cart marked ordered) however long a drain behind thousands of seeded products takes,
	// where a shopper's order answers after DefaultSyncWait.
	seeding := *orders
	seeding.SyncWait = time.Minute
	orders = &seeding
	res := Result{Categories: map[string]int{}}
	now := time.Now().UTC().Truncate(time.Millisecond)
	products := makeProducts(opt, now)
	if err := seedProducts(ctx, s, products, opt, &res); err != nil {
		return res, err
	}
	opt.progress("seeded %d products in %d categories", res.Products, opt.Categories)
	// A catalog read model in another store gets every product through the projector, more
	// than one drain applies within its bound: apply them all before the first order, whose
	// checkout waits for its own follow-ups only (a cart stays frozen until they are applied).
	sy, _ := orders.FollowUps.(order.Syncer)
	if err := catchUp(ctx, sy); err != nil {
		return res, fmt.Errorf("demo: apply the products' follow-ups: %w", err)
	}

	if opt.Password == "" {
		opt.Password = crand.Text() // 26 base32 characters, 130 bits
	}
	res.Password = opt.Password
	hash, err := account.HashPassword(opt.Password) // one hash for all: same password, seeds in seconds
	if err != nil {
		return res, err
	}
	if err := seedUsers(ctx, s, orders, carts, products, hash, now, opt, &res); err != nil {
		return res, err
	}
	opt.progress("seeded %d users, %d orders, %d open carts, %d events", res.Users, res.Orders, res.Carts, res.Events)
	return res, nil
}

// progress writes one line to opt.Progress, if set.
func (opt Options) progress(format string, a ...any) {
	if opt.Progress != nil {
		fmt.Fprintf(opt.Progress, format+"\n", a...)
	}
}

// report tells opt.OnProgress, if set, how far a stage is.
func (opt Options) report(stage string, done, total int) {
	if opt.OnProgress != nil {
		opt.OnProgress(stage, done, total)
	}
}

// makeProducts generates opt.Products products over opt.Categories categories of Zipf-like
// sizes, from a random stream of their own drawn from opt.Seed.
func makeProducts(opt Options, now time.Time) []catalog.Product {
	rng := rand.New(rand.NewPCG(opt.Seed, opt.Seed^0x5eed))
	// Zipf-like sizes: category k gets a share proportional to 1/(k+1).
	weights := make([]float64, opt.Categories)
	total := 0.0
	for k := range weights {
		weights[k] = 1 / float64(k+1)
		total += weights[k]
	}
	var products []catalog.Product
	for k := 0; k < opt.Categories; k++ {
		n := int(math.Round(float64(opt.Products) * weights[k] / total))
		if k == opt.Categories-1 {
			n = opt.Products - len(products)
		}
		n = max(n, 1)
		for i := 0; i < n && len(products) < opt.Products; i++ {
			name := adjectives[rng.IntN(len(adjectives))] + " " + nouns[rng.IntN(len(nouns))]
			attrs := map[string]string{"color": []string{"red", "blue", "black", "white"}[rng.IntN(4)], "brand": fmt.Sprintf("brand-%d", rng.IntN(40))}
			p := catalog.Product{
				ID:          fmt.Sprintf("%s-%05d", categoryNames[k], i),
				Name:        name,
				Description: fmt.Sprintf("%s by %s, in %s (%s).", name, attrs["brand"], attrs["color"], categoryNames[k]),
				Category:    categoryNames[k],
				// Log-normal-ish prices from about 1 to 2000, in cents.
				Price:      money.Amount(100 + int64(math.Exp(rng.Float64()*7.6)*100)/5*5),
				Attributes: attrs,
				Stock:      map[string]int64{},
				CreatedAt:  now, UpdatedAt: now,
			}
			for _, z := range Zones {
				p.Stock[z] = int64(rng.IntN(200))
			}
			products = append(products, p)
		}
	}
	return products
}

// seedProducts writes products in chunks of productChunk, counting them into res.
func seedProducts(ctx context.Context, s *placement.Stores, products []catalog.Product, opt Options, res *Result) error {
	for from := 0; from < len(products); from += productChunk {
		chunk := products[from:min(from+productChunk, len(products))]
		if err := createProducts(ctx, s, chunk, opt.OneByOne); err != nil {
			return err
		}
		for _, p := range chunk {
			res.Categories[p.Category]++
		}
		res.Products += len(chunk)
		opt.report("products", res.Products, len(products))
		if res.Products%1000 == 0 || res.Products == len(products) {
			opt.progress("  products: %d/%d", res.Products, len(products))
		}
	}
	return nil
}

// seedUsers seeds opt.Users users on a pool of workers, adding what they wrote to res. The
// first user that fails stops the rest.
func seedUsers(ctx context.Context, s *placement.Stores, orders *order.Service, carts *cart.Service, products []catalog.Product,
	hash string, now time.Time, opt Options, res *Result) error {
	workers := max(opt.Workers, 1)
	if opt.Workers == 0 {
		workers = 16
	}
	if opt.OneByOne {
		workers = 1
	}
	// Users are independent of each other, so they are seeded concurrently; each draws from its
	// own random stream, so what a user gets does not depend on scheduling. Only when two
	// concurrent orders want the last units of a product does the order count vary by a few.
	var (
		mu     sync.Mutex
		failed error
		next   = make(chan int)
		wg     sync.WaitGroup
	)
	uctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				r, err := seedUser(uctx, s, orders, carts, products, hash, now, opt.Seed, i)
				mu.Lock()
				res.Users += r.Users
				res.Orders += r.Orders
				res.Carts += r.Carts
				res.Events += r.Events
				users := res.Users
				if err != nil && failed == nil {
					failed = err
					cancel()
				}
				mu.Unlock()
				if err == nil {
					opt.report("users", users, opt.Users)
					if users%50 == 0 {
						opt.progress("  users: %d/%d", users, opt.Users)
					}
				}
			}
		}()
	}
feed:
	for i := 0; i < opt.Users; i++ {
		select {
		case next <- i:
		case <-uctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if failed != nil {
		return failed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	return nil
}

// createProducts writes a chunk of products in one call, or one by one for the baseline.
func createProducts(ctx context.Context, s *placement.Stores, ps []catalog.Product, oneByOne bool) error {
	if !oneByOne {
		if err := s.Products.CreateProducts(ctx, ps); err != nil {
			return fmt.Errorf("demo: products %s..%s: %w", ps[0].ID, ps[len(ps)-1].ID, err)
		}
		return nil
	}
	for _, p := range ps {
		if err := s.Products.CreateProduct(ctx, p); err != nil {
			return fmt.Errorf("demo: product %s: %w", p.ID, err)
		}
	}
	return nil
}

// seedUser writes user i with a few past orders, maybe an open cart, and click events, drawing
// from a random stream of its own.
func seedUser(ctx context.Context, s *placement.Stores, orders *order.Service, carts *cart.Service, products []catalog.Product,
	hash string, now time.Time, seed uint64, i int) (Result, error) {
	var res Result
	rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
	userID := fmt.Sprintf("demo-user-%04d", i)
	u := account.User{ID: userID, Email: fmt.Sprintf("demo-%d@example.com", i), PasswordHash: hash, CreatedAt: now}
	if err := s.Users.CreateUser(ctx, u); err != nil {
		return res, fmt.Errorf("demo: user %d: %w", i, err)
	}
	res.Users++
	owner := cart.User(userID)
	// Most users have ordered a few times; each order starts as a cart.
	for o := 0; o < rng.IntN(4); o++ {
		if err := fillCart(ctx, carts, owner, products, rng, 1+rng.IntN(3)); err != nil {
			return res, err
		}
		_, _, err := orders.PlaceFromCart(ctx, userID, Zones[rng.IntN(len(Zones))], fmt.Sprintf("demo-%d-%d", i, o))
		if err != nil && !isShort(err) {
			return res, fmt.Errorf("demo: order for %s: %w", userID, err)
		}
		if err == nil {
			res.Orders++
		}
	}
	if rng.IntN(2) == 0 { // half have something in the cart right now
		if err := fillCart(ctx, carts, owner, products, rng, 1+rng.IntN(4)); err != nil {
			return res, err
		}
		res.Carts++
	}
	for e := 0; e < 5+rng.IntN(20); e++ {
		p := products[rng.IntN(len(products))]
		typ := []event.Type{event.View, event.View, event.View, event.Click, event.Search, event.AddToCart}[rng.IntN(6)]
		ev := event.Event{ID: fmt.Sprintf("demo-%d-%d", i, e), Actor: owner.Key(), Type: typ,
			At: now.Add(-time.Duration(rng.IntN(86400)) * time.Second), ProductID: p.ID,
			Details: map[string]string{"category": p.Category}}
		if err := s.Events.AppendEvent(ctx, ev); err != nil {
			return res, fmt.Errorf("demo: event: %w", err)
		}
		res.Events++
	}
	return res, nil
}

func fillCart(ctx context.Context, carts *cart.Service, owner cart.Owner, products []catalog.Product, rng *rand.Rand, n int) error {
	for j := 0; j < n; j++ {
		// Popular products come first in each category: bias towards low indexes.
		p := products[int(math.Pow(rng.Float64(), 2)*float64(len(products)))]
		if _, err := carts.Put(ctx, owner, time.Time{}, p.ID, int64(1+rng.IntN(3))); err != nil {
			return fmt.Errorf("demo: cart item: %w", err)
		}
	}
	return nil
}

func isShort(err error) bool {
	var short *catalog.InsufficientStockError
	return errors.As(err, &short)
}

// catchUpFor bounds how long the seed waits for the projector to apply the products.
const catchUpFor = 5 * time.Minute

// catchUp drains the projector until one drain ends with nothing failed: each drain is bounded,
// and a bounded drain that ran out of time is followed by the next.
func catchUp(ctx context.Context, p order.Syncer) error {
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpFor)
	defer cancel()
	for {
		err := p.Sync(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		// A follow-up that failed outright (not one the drain's bound cut short) is retried
		// after a pause, not in a tight loop.
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
