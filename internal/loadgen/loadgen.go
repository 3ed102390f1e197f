// Package loadgen drives a running shardmart API over HTTP with the four workloads the
// benchmarks name (order with 3 items, cart item put, category search with a price range,
// session lookup) and reports throughput and latency percentiles.
package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Scenario names.
const (
	Orders  = "orders"
	CartPut = "cart-put"
	Search  = "search"
	Session = "session"
)

// Scenarios lists them in report order.
var Scenarios = []string{Orders, CartPut, Search, Session}

// Config of one run.
type Config struct {
	BaseURL     string
	Concurrency int
	Duration    time.Duration
	// Products are ids (with their category) that workers put into carts and order; Categories
	// are searched.
	Products   []string
	Categories []string
	Zone       string
	Client     *http.Client
	// AdminToken, when set, lets the orders scenario top up the stock it buys from, so it
	// measures orders rather than out-of-stock refusals.
	AdminToken string
}

// Result of one scenario.
type Result struct {
	Scenario  string
	Requests  int
	Errors    int
	Elapsed   time.Duration
	P50, P99  time.Duration
	FirstFail string
}

// PerSecond is the completed-request rate.
func (r Result) PerSecond() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

type worker struct {
	cfg   Config
	token string
	rng   *rand.Rand
	lat   []time.Duration
	errs  int
	first string
	seq   int
	id    int
}

func (w *worker) do(ctx context.Context, method, path string, body any, hdr map[string]string, measure bool) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.cfg.BaseURL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if w.token != "" {
		req.Header.Set("Authorization", "Bearer "+w.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := w.cfg.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if measure {
		w.lat = append(w.lat, time.Since(start))
	}
	return resp.StatusCode, out, err
}

func (w *worker) fail(status int, body []byte, err error) {
	w.errs++
	if w.first == "" {
		w.first = fmt.Sprintf("status %d: %s %v", status, bytes.TrimSpace(body), err)
	}
}

// setup gives the worker a session; for orders it also registers and logs in a fresh user.
func (w *worker) setup(ctx context.Context, login bool) error {
	st, body, err := w.do(ctx, "POST", "/v1/sessions", nil, nil, false)
	if err != nil || st != http.StatusCreated {
		return fmt.Errorf("start session: %d %s %v", st, body, err)
	}
	var s struct{ Token string }
	if err := json.Unmarshal(body, &s); err != nil {
		return err
	}
	w.token = s.Token
	if !login {
		return nil
	}
	cred := map[string]string{"email": fmt.Sprintf("bench-%d-%d@example.com", time.Now().UnixNano(), w.id), "password": "bench-password"}
	if st, body, err := w.do(ctx, "POST", "/v1/users", cred, nil, false); err != nil || st != http.StatusCreated {
		return fmt.Errorf("register: %d %s %v", st, body, err)
	}
	st, body, err = w.do(ctx, "POST", "/v1/login", cred, nil, false)
	if err != nil || st != http.StatusOK {
		return fmt.Errorf("login: %d %s %v", st, body, err)
	}
	// Login hands out a new token and revokes the guest's.
	if err := json.Unmarshal(body, &s); err != nil || s.Token == "" {
		return fmt.Errorf("login answered no token: %s %v", body, err)
	}
	w.token = s.Token
	return nil
}

// step runs one measured request of the scenario (plus unmeasured preparation).
func (w *worker) step(ctx context.Context, scenario string) {
	cfg := w.cfg
	product := func() string { return cfg.Products[w.rng.IntN(len(cfg.Products))] }
	var st int
	var body []byte
	var err error
	ok := func(codes ...int) {
		if ctx.Err() != nil {
			return // cut off by the end of the run, not a server failure
		}
		if err != nil || !slices.Contains(codes, st) {
			w.fail(st, body, err)
		}
	}
	switch scenario {
	case Orders:
		for i := 0; i < 3; i++ { // fill the cart, not measured
			st, body, err = w.do(ctx, "PUT", "/v1/cart/items/"+product(), map[string]int{"quantity": 1}, nil, false)
			ok(http.StatusOK)
		}
		w.seq++
		st, body, err = w.do(ctx, "POST", "/v1/orders", map[string]string{"zone": cfg.Zone},
			map[string]string{"Idempotency-Key": fmt.Sprintf("bench-%d-%d", w.id, w.seq)}, true)
		ok(http.StatusCreated, http.StatusConflict) // 409: a product ran out of stock, a correct answer
		if st == http.StatusConflict {              // the cart stays active: empty it for the next round
			w.clearCart(ctx)
		}
	case CartPut:
		// Each worker edits 50 products of its own, so its cart never reaches the 100-item cap.
		p := cfg.Products[(w.id*50+w.rng.IntN(50))%len(cfg.Products)]
		st, body, err = w.do(ctx, "PUT", "/v1/cart/items/"+p, map[string]int{"quantity": 1 + w.rng.IntN(5)}, nil, true)
		ok(http.StatusOK)
	case Search:
		c := cfg.Categories[w.rng.IntN(len(cfg.Categories))]
		st, body, err = w.do(ctx, "GET", "/v1/products?category="+c+"&min_price=10.00&max_price=500.00&limit=20", nil, nil, true)
		ok(http.StatusOK)
	case Session:
		st, body, err = w.do(ctx, "GET", "/v1/cart", nil, nil, true)
		ok(http.StatusOK)
	}
}

func (w *worker) clearCart(ctx context.Context) {
	st, body, err := w.do(ctx, "GET", "/v1/cart", nil, nil, false)
	if err != nil || st != http.StatusOK {
		return
	}
	var c struct {
		Items []struct {
			ProductID string `json:"product_id"`
		}
	}
	if json.Unmarshal(body, &c) != nil {
		return
	}
	for _, it := range c.Items {
		_, _, _ = w.do(ctx, "DELETE", "/v1/cart/items/"+it.ProductID, nil, nil, false)
	}
}

// restock adds units to every product of cfg in its zone through the admin API.
func restock(ctx context.Context, cfg Config, units int) error {
	w := &worker{cfg: cfg}
	for _, id := range cfg.Products {
		st, body, err := w.do(ctx, "POST", "/v1/products/"+id+"/stock", map[string]any{"zone": cfg.Zone, "delta": units},
			map[string]string{"X-Admin-Token": cfg.AdminToken}, false)
		if err != nil || st != http.StatusOK {
			return fmt.Errorf("restock %s: status %d %s %v", id, st, bytes.TrimSpace(body), err)
		}
	}
	return nil
}

// Run drives one scenario for cfg.Duration with cfg.Concurrency workers.
func Run(ctx context.Context, cfg Config, scenario string) (Result, error) {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency}}
	}
	if scenario == Orders && cfg.AdminToken != "" {
		if err := restock(ctx, cfg, 1_000_000); err != nil {
			return Result{}, err
		}
	}
	workers := make([]*worker, cfg.Concurrency)
	for i := range workers {
		workers[i] = &worker{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(i), 7)), id: i}
		if err := workers[i].setup(ctx, scenario == Orders); err != nil {
			return Result{}, fmt.Errorf("%s: worker %d: %w", scenario, i, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				w.step(ctx, scenario)
			}
		}()
	}
	wg.Wait()
	res := Result{Scenario: scenario, Elapsed: time.Since(start)}
	var all []time.Duration
	for _, w := range workers {
		all = append(all, w.lat...)
		res.Errors += w.errs
		if res.FirstFail == "" {
			res.FirstFail = w.first
		}
	}
	// Requests cut off by the deadline are neither successes nor failures of the server.
	res.Requests = len(all)
	if len(all) > 0 {
		slices.Sort(all)
		res.P50, res.P99 = all[len(all)/2], all[int(0.99*float64(len(all)-1))]
	}
	return res, nil
}

// DiscoverProducts lists up to perCategory product ids of each category through the API.
func DiscoverProducts(ctx context.Context, client *http.Client, baseURL string, categories []string, perCategory int) ([]string, error) {
	var ids []string
	for _, c := range categories {
		req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/v1/products?category=%s&limit=%d", baseURL, c, perCategory), nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		var page struct {
			Items []struct{ ID string }
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("list category %s: status %d %v", c, resp.StatusCode, err)
		}
		for _, it := range page.Items {
			ids = append(ids, it.ID)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("no products found in categories %v", categories)
	}
	return ids, nil
}
