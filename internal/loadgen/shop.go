package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Request kinds of the shop workload.
const (
	Browse   = "browse"   // a category's first page
	Search   = "search"   // a category within a price range
	Product  = "product"  // a product page
	Cart     = "cart"     // put an item into the cart
	Checkout = "checkout" // place an order from the cart (Idempotency-Key)
	Event    = "event"    // post a click-stream event
	Login    = "login"    // a new session, then login (bcrypt on the server)
)

// Scenario names.
const (
	ScenarioMix       = "mix"
	ScenarioFlashSale = "flash-sale"
)

// Scenarios lists them.
var Scenarios = []string{ScenarioMix, ScenarioFlashSale}

// Workloads: how requests are spread over the users.
const (
	// WorkloadPopulation is a shop's population: each request comes from a user drawn
	// uniformly among those with no request in flight, so every user sends one request at a
	// time, as a browser does, and over thousands of users none is more than a sliver of the
	// traffic. Products and categories stay Zipf-skewed.
	WorkloadPopulation = "population"
	// WorkloadLegacy is the earlier model (also the zero value): users Zipf-skewed like
	// products, and one user's cart and checkout requests queued behind each other in the
	// client, the queue counted in their latency.
	WorkloadLegacy = "legacy"
)

// Workloads lists them.
var Workloads = []string{WorkloadPopulation, WorkloadLegacy}

// Weight is one kind's share of a mix.
type Weight struct {
	Kind  string
	Share float64
}

// Mix is a request mix; shares need not add up to 100.
type Mix []Weight

// DefaultMix is a shop's day: browse and search 60 %, product page 15 %, cart 15 %,
// checkout 5 %, events and login the rest. Login is kept at 0.5 %: each one is a bcrypt
// comparison (tens of milliseconds of server CPU by design), so at 1 % it alone would decide
// the total's p99.
var DefaultMix = Mix{{Browse, 30}, {Search, 30}, {Product, 15}, {Cart, 15}, {Checkout, 5}, {Event, 4.5}, {Login, 0.5}}

// FlashSaleMix is many buyers after few products: look, put in the cart, buy.
var FlashSaleMix = Mix{{Product, 40}, {Cart, 30}, {Checkout, 30}}

// Picker draws kinds of a mix.
type Picker struct {
	kinds []string
	cum   []float64
}

// NewPicker prepares m.
func NewPicker(m Mix) Picker {
	var p Picker
	total := 0.0
	for _, w := range m {
		total += w.Share
		p.kinds = append(p.kinds, w.Kind)
		p.cum = append(p.cum, total)
	}
	for i := range p.cum {
		p.cum[i] /= total
	}
	return p
}

// Pick draws one kind.
func (p Picker) Pick(rng *rand.Rand) string {
	x := rng.Float64()
	for i, c := range p.cum {
		if x < c {
			return p.kinds[i]
		}
	}
	return p.kinds[len(p.kinds)-1]
}

// Config of the shop workload.
type Config struct {
	BaseURL string
	// BaseURLs, when it has more than one, are several API processes of one shop: requests
	// go to them in turn, as a round-robin load balancer would send them (BaseURL is ignored).
	BaseURLs []string
	Client   *http.Client
	// AdminToken lets the workload top up the stock of the products it buys most (mix) and
	// create the flash-sale products; without it the mix runs on the stock there is.
	AdminToken string
	Scenario   string
	// Mix, when set, replaces the mix scenario's DefaultMix.
	Mix Mix
	// Workload is WorkloadPopulation or WorkloadLegacy ("").
	Workload string
	// Users are provisioned before the run: by Provision when set, else registered and
	// logged in through the API (two bcrypt operations each on the server).
	Users     int
	Provision Provisioner
	// Seed fixes every random choice: the same seed gives the same request sequence.
	Seed uint64
	// ZipfS is the skew (> 1) of users, products and categories: rank k is chosen with
	// probability proportional to 1/(k+1)^s.
	ZipfS      float64
	Categories []string
	// PerCategory products are discovered from each category (at most 100).
	PerCategory int
	Zone        string
	// FlashProducts are created with FlashStock units each in Zone for the flash sale.
	FlashProducts int
	FlashStock    int64
	// Log receives setup progress; nil discards it.
	Log io.Writer
}

type user struct {
	email, password, token string
	// mu serialises the legacy workload's cart and checkout requests of one user; the wait
	// counts in their latency, which runs from the due time.
	mu    sync.Mutex
	lines []string // products in the cart, as far as this client knows
	seq   int
}

// Shop is a prepared workload; Next feeds Run.
type Shop struct {
	cfg      Config
	runID    string
	users    []*user
	products []string // by popularity rank
	rng      *rand.Rand
	picker   Picker
	zUser    *rand.Zipf // legacy workload
	idle     *idleUsers // population workload
	zProduct *rand.Zipf
	zCat     *rand.Zipf

	next atomic.Uint64 // round-robin position over the base URLs

	flash       []string
	flashBefore int64
	mu          sync.Mutex
	sold        int64
	orders      int64
}

// Prepare registers the users, discovers the products (or creates the flash sale's) and tops
// up stock, all before any measured request.
func Prepare(ctx context.Context, cfg Config) (*Shop, error) {
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Users < 1 {
		return nil, fmt.Errorf("users must be at least 1, got %d", cfg.Users)
	}
	if cfg.ZipfS <= 1 {
		return nil, fmt.Errorf("zipf skew must be > 1, got %v", cfg.ZipfS)
	}
	if len(cfg.Categories) == 0 {
		return nil, errors.New("no categories to browse")
	}
	if cfg.PerCategory < 1 || cfg.PerCategory > 100 {
		cfg.PerCategory = 100
	}
	if len(cfg.BaseURLs) == 0 {
		cfg.BaseURLs = []string{cfg.BaseURL}
	}
	if cfg.Workload != "" && !slices.Contains(Workloads, cfg.Workload) {
		return nil, fmt.Errorf("unknown workload %q (have %s)", cfg.Workload, strings.Join(Workloads, ", "))
	}
	s := &Shop{cfg: cfg, runID: fmt.Sprintf("%x", time.Now().UnixNano()), rng: rand.New(rand.NewPCG(cfg.Seed, 0x5e1f))}
	switch cfg.Scenario {
	case ScenarioMix, "":
		s.picker = NewPicker(DefaultMix)
		if cfg.Mix != nil {
			s.picker = NewPicker(cfg.Mix)
		}
		ids, err := DiscoverProducts(ctx, cfg.Client, cfg.BaseURLs[0], cfg.Categories, cfg.PerCategory)
		if err != nil {
			return nil, err
		}
		// Popularity must not follow the listing's price order.
		s.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		s.products = ids
		if cfg.AdminToken != "" {
			hot := s.products[:min(len(s.products), 200)]
			fmt.Fprintf(cfg.Log, "topping up the stock of the %d most bought products in %s\n", len(hot), cfg.Zone)
			for _, id := range hot {
				if err := s.adjustStock(ctx, id, 1_000_000); err != nil {
					return nil, err
				}
			}
		}
	case ScenarioFlashSale:
		if cfg.AdminToken == "" {
			return nil, errors.New("the flash sale creates its products: it needs the admin token")
		}
		if cfg.FlashProducts < 1 || cfg.FlashStock < 1 {
			return nil, fmt.Errorf("flash sale needs products and stock, got %d and %d", cfg.FlashProducts, cfg.FlashStock)
		}
		s.picker = NewPicker(FlashSaleMix)
		for k := range cfg.FlashProducts {
			id := fmt.Sprintf("flash-%s-%d", s.runID, k)
			body := map[string]any{"id": id, "name": fmt.Sprintf("Flash deal %d", k), "category": cfg.Categories[0],
				"price": "9.99", "stock": map[string]int64{cfg.Zone: cfg.FlashStock}}
			st, b, err := s.call(ctx, "POST", "/v1/products", "", body, "X-Admin-Token", cfg.AdminToken)
			if err != nil || st != http.StatusCreated {
				return nil, fmt.Errorf("create flash-sale product: %s", describe("POST /v1/products", st, b, err))
			}
			s.flash = append(s.flash, id)
		}
		s.products = s.flash
		s.flashBefore = int64(cfg.FlashProducts) * cfg.FlashStock
	default:
		return nil, fmt.Errorf("unknown scenario %q (have %s)", cfg.Scenario, strings.Join(Scenarios, ", "))
	}
	if err := s.provision(ctx); err != nil {
		return nil, err
	}
	zipf := func(n int) *rand.Zipf { return rand.NewZipf(s.rng, cfg.ZipfS, 1, uint64(n-1)) }
	s.zProduct, s.zCat = zipf(len(s.products)), zipf(len(cfg.Categories))
	if cfg.Workload == WorkloadPopulation {
		s.idle = newIdleUsers(len(s.users))
	} else {
		s.zUser = zipf(len(s.users))
	}
	return s, nil
}

// provision creates the users: through cfg.Provision; else, with the admin token, through the
// server's bulk route when it has it on; else registered one by one through the API.
func (s *Shop) provision(ctx context.Context) error {
	switch {
	case s.cfg.Provision != nil:
		return s.provisionWith(ctx)
	case s.cfg.AdminToken != "":
		err := s.bulkRegister(ctx)
		if !errors.Is(err, errNoBulkRoute) {
			return err
		}
		fmt.Fprintf(s.cfg.Log, "%v: registering the users one by one instead\n", err)
	}
	return s.register(ctx)
}

// provisionWith creates the users through cfg.Provision.
func (s *Shop) provisionWith(ctx context.Context) error {
	start := time.Now()
	emails := make([]string, s.cfg.Users)
	for i := range emails {
		emails[i] = s.email(i)
	}
	tokens, err := s.cfg.Provision(ctx, emails, BenchPassword)
	if err != nil {
		return fmt.Errorf("provision %d users: %w", len(emails), err)
	}
	if len(tokens) != len(emails) {
		return fmt.Errorf("provision %d users: got %d tokens", len(emails), len(tokens))
	}
	s.users = make([]*user, len(emails))
	for i, e := range emails {
		s.users[i] = &user{email: e, password: BenchPassword, token: tokens[i]}
	}
	fmt.Fprintf(s.cfg.Log, "provisioned %d users with sessions in %s\n", len(emails), time.Since(start).Round(time.Millisecond))
	return nil
}

// email is user i's address, unique to this run.
func (s *Shop) email(i int) string { return fmt.Sprintf("bench-%s-%d@example.com", s.runID, i) }

// register registers each user through POST /v1/users and logs it in, userWorkers at a time.
func (s *Shop) register(ctx context.Context) error {
	fmt.Fprintf(s.cfg.Log, "registering %d users (bcrypt on the server: this takes a while)\n", s.cfg.Users)
	s.users = make([]*user, s.cfg.Users)
	for i := range s.users {
		s.users[i] = &user{email: s.email(i), password: "bench-password-" + s.runID}
	}
	start := time.Now()
	err := s.eachUser(ctx, s.users, "registered and logged in", func(u *user) error {
		tok, err := s.newSession(ctx)
		if err != nil {
			return err
		}
		cred := map[string]string{"email": u.email, "password": u.password}
		if st, b, err := s.call(ctx, "POST", "/v1/users", tok, cred); err != nil || st != http.StatusCreated {
			return fmt.Errorf("register: %s", describe("POST /v1/users", st, b, err))
		}
		u.token, err = s.login(ctx, tok, u)
		return err
	})
	if err == nil {
		fmt.Fprintf(s.cfg.Log, "provisioned %d users with sessions in %s\n", len(s.users), time.Since(start).Round(time.Millisecond))
	}
	return err
}

func (s *Shop) newSession(ctx context.Context) (string, error) {
	st, b, err := s.call(ctx, "POST", "/v1/sessions", "", nil)
	if err != nil || st != http.StatusCreated {
		return "", fmt.Errorf("start session: %s", describe("POST /v1/sessions", st, b, err))
	}
	var out struct{ Token string }
	if err := json.Unmarshal(b, &out); err != nil {
		return "", fmt.Errorf("start session: %w", err)
	}
	return out.Token, nil
}

// login answers the user's new token; the guest token it was called with is revoked.
func (s *Shop) login(ctx context.Context, guest string, u *user) (string, error) {
	st, b, err := s.call(ctx, "POST", "/v1/login", guest, map[string]string{"email": u.email, "password": u.password})
	if err != nil || st != http.StatusOK {
		return "", fmt.Errorf("login: %s", describe("POST /v1/login", st, b, err))
	}
	var out struct{ Token string }
	if err := json.Unmarshal(b, &out); err != nil || out.Token == "" {
		return "", fmt.Errorf("login answered no token: %s", b)
	}
	return out.Token, nil
}

func (s *Shop) adjustStock(ctx context.Context, id string, delta int64) error {
	st, b, err := s.call(ctx, "POST", "/v1/products/"+url.PathEscape(id)+"/stock", "",
		map[string]any{"zone": s.cfg.Zone, "delta": delta}, "X-Admin-Token", s.cfg.AdminToken)
	if err != nil || st != http.StatusOK {
		return fmt.Errorf("top up stock: %s", describe("POST /v1/products/"+id+"/stock", st, b, err))
	}
	return nil
}

// send sends one request and returns its answer, whose body the caller closes; hdr is name,
// value pairs.
func (s *Shop) send(ctx context.Context, method, path, token string, body any, hdr ...string) (*http.Response, error) {
	req, err := NewRequest(ctx, method, s.base()+path, token, body, hdr...)
	if err != nil {
		return nil, err
	}
	return s.cfg.Client.Do(req)
}

// call sends one request and reads its answer; hdr is name, value pairs.
func (s *Shop) call(ctx context.Context, method, path, token string, body any, hdr ...string) (int, []byte, error) {
	resp, err := s.send(ctx, method, path, token, body, hdr...)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// expectCall sends a request whose answer's body matters only when its status is not want:
// a success's body is still read to the end (its latency includes it, and the connection is
// reused) but dropped as it is read, so the load generator holds no copy of every page.
func (s *Shop) expectCall(ctx context.Context, want int, method, path, token string, body any) (Outcome, string) {
	what := method + " " + path
	resp, err := s.send(ctx, method, path, token, body)
	if err != nil {
		return Failed, describe(what, 0, nil, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, err := io.ReadAll(resp.Body)
		return expect(what, want, resp.StatusCode, b, err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return Failed, describe(what, resp.StatusCode, nil, err)
	}
	return OK, ""
}

// NewRequest is a request to the shop's JSON API at url: body (if not nil) marshalled as JSON,
// token (if not empty) as a bearer token, and hdr as header name/value pairs.
func NewRequest(ctx context.Context, method, url, token string, body any, hdr ...string) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req, nil
}

// base is the API process the next request goes to: each in turn.
func (s *Shop) base() string {
	urls := s.cfg.BaseURLs
	return urls[(s.next.Add(1)-1)%uint64(len(urls))]
}

func describe(what string, status int, body []byte, err error) string {
	if err != nil {
		return fmt.Sprintf("%s: %v", what, err)
	}
	b := bytes.TrimSpace(body)
	if len(b) > 300 {
		b = b[:300]
	}
	return fmt.Sprintf("%s: status %d: %s", what, status, b)
}

// expect turns an answer into an outcome: want is success, anything else a failure.
func expect(what string, want, status int, body []byte, err error) (Outcome, string) {
	if err == nil && status == want {
		return OK, ""
	}
	return Failed, describe(what, status, body, err)
}

// Next draws the next request. It runs on Run's dispatcher goroutine only, which owns the
// random generators.
func (s *Shop) Next(int) Op {
	kind := s.picker.Pick(s.rng)
	if s.idle != nil {
		i, ok := s.idle.take(s.rng)
		if !ok {
			return Op{Kind: kind, NotSent: fmt.Sprintf("no idle user: all %d users have a request in flight (raise --users)", len(s.users))}
		}
		op := s.op(kind, s.users[i], false)
		do := op.Do
		op.Do = func(ctx context.Context) (Outcome, string) {
			defer s.idle.put(i)
			return do(ctx)
		}
		op.Dropped = func() { s.idle.put(i) }
		return op
	}
	return s.op(kind, s.users[s.zUser.Uint64()], true)
}

// op builds a request of kind from u; serial queues u's cart and checkout requests behind
// each other (the legacy workload, where one user may have several in flight).
func (s *Shop) op(kind string, u *user, serial bool) Op {
	lock := func() func() {
		if !serial {
			return func() {}
		}
		u.mu.Lock()
		return u.mu.Unlock
	}
	product := s.products[s.zProduct.Uint64()]
	category := s.cfg.Categories[s.zCat.Uint64()]
	qty := 1
	if s.cfg.Scenario != ScenarioFlashSale {
		qty += s.rng.IntN(3)
	}
	var do func(ctx context.Context) (Outcome, string)
	var prior *Prior
	switch kind {
	case Browse:
		path := "/v1/products?category=" + url.QueryEscape(category) + "&limit=20"
		do = func(ctx context.Context) (Outcome, string) {
			return s.expectCall(ctx, http.StatusOK, "GET", path, "", nil)
		}
	case Search:
		lo := []int{0, 10, 20, 50, 100}[s.rng.IntN(5)]
		hi := lo + []int{50, 100, 500}[s.rng.IntN(3)]
		path := fmt.Sprintf("/v1/products?category=%s&min_price=%d.00&max_price=%d.00&limit=20", url.QueryEscape(category), lo, hi)
		do = func(ctx context.Context) (Outcome, string) {
			return s.expectCall(ctx, http.StatusOK, "GET", path, "", nil)
		}
	case Product:
		path := "/v1/products/" + url.PathEscape(product)
		do = func(ctx context.Context) (Outcome, string) {
			return s.expectCall(ctx, http.StatusOK, "GET", path, "", nil)
		}
	case Cart:
		do = func(ctx context.Context) (Outcome, string) {
			defer lock()()
			return s.putItem(ctx, u, product, qty)
		}
	case Checkout:
		prior = &Prior{}
		do = func(ctx context.Context) (Outcome, string) {
			defer lock()()
			return s.checkout(ctx, u, product, prior)
		}
	case Event:
		body := map[string]any{"type": "view", "product_id": product}
		do = func(ctx context.Context) (Outcome, string) {
			return s.expectCall(ctx, http.StatusCreated, "POST", "/v1/events", u.token, body)
		}
	case Login:
		do = func(ctx context.Context) (Outcome, string) {
			guest, err := s.newSession(ctx)
			if err == nil {
				_, err = s.login(ctx, guest, u)
			}
			if err != nil {
				return Failed, err.Error()
			}
			return OK, ""
		}
	}
	return Op{Kind: kind, User: u.email, Do: do, Prior: prior}
}

// maxLines keeps carts under the server's item cap: past it a put re-sets a line.
const maxLines = 40

func (s *Shop) putItem(ctx context.Context, u *user, product string, qty int) (Outcome, string) {
	if len(u.lines) >= maxLines && !slices.Contains(u.lines, product) {
		product = u.lines[len(u.lines)-1]
	}
	path := "/v1/cart/items/" + url.PathEscape(product)
	o, why := s.expectCall(ctx, http.StatusOK, "PUT", path, u.token, map[string]int{"quantity": qty})
	if o == OK && !slices.Contains(u.lines, product) {
		u.lines = append(u.lines, product)
	}
	return o, why
}

// checkout orders the user's cart, filling an empty one with product first: that put is a
// cart edit, noted in prior and recorded as one, so the checkout's latency is the order
// request's alone. A 409 for insufficient stock is the expected answer once stock is gone:
// the line is removed so the user's next checkout can succeed.
func (s *Shop) checkout(ctx context.Context, u *user, product string, prior *Prior) (Outcome, string) {
	if len(u.lines) == 0 {
		o, why := s.putItem(ctx, u, product, 1)
		*prior = Prior{Kind: Cart, Outcome: o, Why: why, End: time.Now()}
		if o != OK {
			return Failed, "not sent: the cart edit before it failed"
		}
	}
	u.seq++
	key := fmt.Sprintf("bench-%s-%s-%d", s.runID, u.email, u.seq)
	st, b, err := s.call(ctx, "POST", "/v1/orders", u.token, map[string]string{"zone": s.cfg.Zone}, "Idempotency-Key", key)
	switch {
	case err == nil && st == http.StatusCreated:
		var o struct {
			Items []struct {
				ProductID string `json:"product_id"`
				Quantity  int64  `json:"quantity"`
			}
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return Failed, fmt.Sprintf("POST /v1/orders: decode: %v", err)
		}
		s.mu.Lock()
		s.orders++
		for _, it := range o.Items {
			if slices.Contains(s.flash, it.ProductID) {
				s.sold += it.Quantity
			}
		}
		s.mu.Unlock()
		u.lines = nil
		return OK, ""
	case err == nil && st == http.StatusConflict:
		var p struct {
			Type      string `json:"type"`
			ProductID string `json:"product_id"`
		}
		if json.Unmarshal(b, &p) == nil && strings.HasSuffix(p.Type, "/insufficient-stock") {
			if p.ProductID != "" {
				path := "/v1/cart/items/" + url.PathEscape(p.ProductID)
				if st, _, err := s.call(ctx, "DELETE", path, u.token, nil); err == nil && st < 300 {
					u.lines = slices.DeleteFunc(u.lines, func(x string) bool { return x == p.ProductID })
				}
			}
			return Expected, ""
		}
	}
	return Failed, describe("POST /v1/orders", st, b, err)
}

// FlashCheck is the flash sale's end-of-run check, read through the API.
type FlashCheck struct {
	Products    []string `json:"products"`
	StockBefore int64    `json:"stock_before"`
	StockAfter  int64    `json:"stock_after"`
	// UnitsSold are the units of the flash products in orders the server confirmed (201).
	UnitsSold int64 `json:"units_sold"`
	Orders    int64 `json:"orders"`
	// Oversold: more units confirmed than there were, or stock below zero.
	Oversold bool `json:"oversold"`
	// Consistent: the stock taken equals the units confirmed (false also when a confirmed
	// order's answer was lost to a timeout).
	Consistent bool `json:"consistent"`
}

// CheckFlashSale reads the flash products' stock after the run (waiting up to 10 s for a
// catalog read model to catch up) and compares it with the confirmed orders; nil outside the
// flash sale.
func (s *Shop) CheckFlashSale(ctx context.Context) (*FlashCheck, error) {
	if len(s.flash) == 0 {
		return nil, nil
	}
	s.mu.Lock()
	fc := &FlashCheck{Products: s.flash, StockBefore: s.flashBefore, UnitsSold: s.sold, Orders: s.orders}
	s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fc.StockAfter = 0
		for _, id := range s.flash {
			st, b, err := s.call(ctx, "GET", "/v1/products/"+url.PathEscape(id), "", nil)
			if err != nil || st != http.StatusOK {
				return nil, fmt.Errorf("flash-sale check: %s", describe("GET /v1/products/"+id, st, b, err))
			}
			var p struct{ Stock map[string]int64 }
			if err := json.Unmarshal(b, &p); err != nil {
				return nil, fmt.Errorf("flash-sale check: %w", err)
			}
			fc.StockAfter += p.Stock[s.cfg.Zone]
		}
		fc.Consistent = fc.StockBefore-fc.StockAfter == fc.UnitsSold
		if fc.Consistent || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	fc.Oversold = fc.UnitsSold > fc.StockBefore || fc.StockAfter < 0
	return fc, nil
}

// DiscoverProducts lists up to perCategory product ids of each category through the API.
func DiscoverProducts(ctx context.Context, client *http.Client, baseURL string, categories []string, perCategory int) ([]string, error) {
	var ids []string
	for _, c := range categories {
		u := fmt.Sprintf("%s/v1/products?category=%s&limit=%d", baseURL, url.QueryEscape(c), perCategory)
		req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("list category %s: %w", c, err)
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
