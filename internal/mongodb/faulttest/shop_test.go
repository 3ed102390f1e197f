package faulttest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"golang.org/x/crypto/bcrypt"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/loadgen"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/serverproc"
	"github.com/shardmart/shardmart/internal/shop"
	store "github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/testkit/faultnet"
)

// The shop under a sick primary: steady traffic through the real HTTP API (every family on
// MongoDB) while the primary is frozen or cut off for faultFor, then healed. Every request's
// start, end and answer is recorded; the assertions read that history.
const (
	faultFor = 15 * time.Second
	// stallMargin is what the shop's longest gap between acknowledged writes may exceed the
	// set's own by (the longest gap between majority writes an independent client gets
	// acknowledged: election, catch-up, the remaining secondary's switch of sync source,
	// discovery, any further election): 2 s. The shop's writes resume with the
	// independent client's once a request makes one majority write (docs/mongodb.md,
	// "Failover", has the runs).
	stallMargin = 2 * time.Second
	shopRate    = 20 // actions per second, open loop
	// shopUsers is enough shoppers that those whose request is caught on the sick member (up
	// to the API's request timeout) leave idle ones for the actions due meanwhile.
	shopUsers = 250
	shopStock = 1_000_000
)

// TestShopRidesOutPrimaryPause freezes the primary (SIGSTOP: a long GC pause, a stuck disk) for
// 15 s, then resumes it.
func TestShopRidesOutPrimaryPause(t *testing.T) {
	runShopFault(t, "pause", func(t *testing.T, ctx context.Context, victim int) (heal func() error) {
		if err := set.Pause(victim); err != nil {
			t.Fatal(err)
		}
		resumed := false
		heal = func() error {
			if resumed {
				return nil
			}
			resumed = true
			return set.Resume(victim)
		}
		// Runs before start's restore, even when the test fails.
		t.Cleanup(func() { _ = heal() })
		return heal
	})
}

// TestShopRidesOutPrimaryCutOff cuts the primary off the network for 15 s (nobody reaches it,
// it reaches nobody: faultnet.CutProcess), then heals the cut. The chain and the cgroup are
// removed in t.Cleanup, so a failing test leaves nothing behind.
func TestShopRidesOutPrimaryCutOff(t *testing.T) {
	runShopFault(t, "cut", func(t *testing.T, ctx context.Context, victim int) (heal func() error) {
		_, port, err := net.SplitHostPort(set.Members()[victim].Host)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		pid, ok := set.PID(victim)
		if !ok {
			t.Fatalf("member %d is not running", victim)
		}
		chain := faultnet.New(t)
		if err := chain.CutProcess(ctx, t, pid, p); err != nil {
			t.Fatal(err)
		}
		return func() error { return chain.Heal(context.Background()) }
	})
}

// --- the recorded history ---

// call is one HTTP request as the client saw it.
type call struct {
	kind        string // put, remove, order
	user        int
	key         string // an order's Idempotency-Key
	start, end  time.Time
	status      int    // 0: no answer (transport error)
	err         string // transport error
	problem     string // problem type suffix, for errors
	retryAfter  string
	contentType string
	requestID   string // the API's X-Request-Id, to find the logged cause of an error
}

func (c call) ok() bool            { return c.status >= 200 && c.status < 300 }
func (c call) took() time.Duration { return c.end.Sub(c.start) }

// held is the answer to a retry while the cart is still frozen by an earlier attempt whose
// outcome was unknown (409 checkout-in-progress until the checkout lease settles it): the
// designed answer to an unknown outcome, counted apart from errors.
func (c call) held() bool {
	return c.status == http.StatusConflict && c.problem == "checkout-in-progress"
}

type history struct {
	mu    sync.Mutex
	calls []call
}

func (h *history) add(c call) {
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
}

func (h *history) all() []call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// --- the shop's clients ---

type shopper struct {
	i       int
	token   string
	rng     *rand.Rand
	known   []string // products certainly in the cart (an unknown put is not counted, an unknown remove is)
	pending string   // an order's Idempotency-Key whose outcome is unknown: the next action retries it
	seq     int
}

type ackedOrder struct {
	key, id string
	user    int
	created bool
}

type shopClient struct {
	base     string
	http     *http.Client
	products []string
	hist     history
	mu       sync.Mutex
	orders   []ackedOrder
}

func (s *shopClient) do(ctx context.Context, kind string, user int, method, path, token string, body any, hdr ...string) (call, []byte) {
	req, err := loadgen.NewRequest(ctx, method, s.base+path, token, body, hdr...)
	if err != nil {
		panic(err)
	}
	c := call{kind: kind, user: user, key: req.Header.Get("Idempotency-Key")}
	c.start = time.Now()
	resp, err := s.http.Do(req)
	var out []byte
	if err == nil {
		out, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		c.status, c.retryAfter, c.contentType = resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type")
		c.requestID = resp.Header.Get("X-Request-Id")
	}
	c.end = time.Now()
	if err != nil {
		c.err = err.Error()
	}
	if c.status >= 400 {
		var p struct{ Type string }
		_ = json.Unmarshal(out, &p)
		c.problem = p.Type[strings.LastIndexByte(p.Type, '/')+1:]
	}
	if kind != "" {
		s.hist.add(c)
	}
	return c, out
}

// register starts a session, registers and logs in one user (setup, not recorded).
func (s *shopClient) register(ctx context.Context, i int) (string, error) {
	c, b := s.do(ctx, "", i, "POST", "/v1/sessions", "", nil)
	if c.status != http.StatusCreated {
		return "", fmt.Errorf("start session: %d %s %s", c.status, c.err, b)
	}
	var tok struct{ Token string }
	_ = json.Unmarshal(b, &tok)
	cred := map[string]string{"email": fmt.Sprintf("shopper-%d@example.com", i), "password": "faulttest-password"}
	if c, b := s.do(ctx, "", i, "POST", "/v1/users", tok.Token, cred); c.status != http.StatusCreated {
		return "", fmt.Errorf("register: %d %s %s", c.status, c.err, b)
	}
	c, b = s.do(ctx, "", i, "POST", "/v1/login", tok.Token, cred)
	if c.status != http.StatusOK {
		return "", fmt.Errorf("login: %d %s %s", c.status, c.err, b)
	}
	_ = json.Unmarshal(b, &tok)
	return tok.Token, nil
}

// step is one action of a shopper: retry a pending order, or edit the cart, or order it.
func (s *shopClient) step(ctx context.Context, u *shopper) {
	r := u.rng.Float64()
	switch {
	case u.pending != "":
		s.order(ctx, u, u.pending)
	case len(u.known) == 0 || r < 0.45:
		p := s.products[u.rng.IntN(len(s.products))]
		c, _ := s.do(ctx, "put", u.i, "PUT", "/v1/cart/items/"+url.PathEscape(p), u.token, map[string]int64{"quantity": 1 + u.rng.Int64N(3)})
		if c.ok() && !slices.Contains(u.known, p) {
			u.known = append(u.known, p)
		}
	case r < 0.6 && len(u.known) >= 2:
		p := u.known[0]
		u.known = u.known[1:] // removed, or perhaps: no longer counted on either way
		s.do(ctx, "remove", u.i, "DELETE", "/v1/cart/items/"+url.PathEscape(p), u.token, nil)
	default:
		u.seq++
		s.order(ctx, u, fmt.Sprintf("shop-%d-%d", u.i, u.seq))
	}
}

// order posts the cart as an order under key; an answer that leaves the outcome unknown makes
// the shopper retry the same key, as a client of an idempotent API does.
func (s *shopClient) order(ctx context.Context, u *shopper, key string) {
	c, b := s.do(ctx, "order", u.i, "POST", "/v1/orders", u.token, map[string]string{"zone": zone}, "Idempotency-Key", key)
	switch {
	case c.ok():
		var o struct{ ID string }
		_ = json.Unmarshal(b, &o)
		s.mu.Lock()
		s.orders = append(s.orders, ackedOrder{key: key, id: o.ID, user: u.i, created: c.status == http.StatusCreated})
		s.mu.Unlock()
		u.pending, u.known = "", nil
	case c.status == 0 || c.status >= 500 || c.held():
		u.pending = key
	default: // a definite refusal: nothing was ordered under this key
		u.pending, u.known = "", nil
	}
}

// --- the run ---

type faultFunc func(t *testing.T, ctx context.Context, victim int) (heal func() error)

func runShopFault(t *testing.T, name string, inject faultFunc) {
	ctx := start(t)
	account.HashCost = bcrypt.MinCost
	db := fmt.Sprintf("faulttest_shop_%s_%d", name, time.Now().UnixNano())
	cfg := placement.Config{}
	for _, f := range placement.Families {
		cfg[f] = placement.Mongo
	}
	quiet := slog.New(slog.DiscardHandler)
	// The API logs the cause of every 500 (and 503) at error level: kept to explain them.
	var causes serverproc.Output
	apiLog := slog.New(slog.NewTextHandler(&causes, &slog.HandlerOptions{Level: slog.LevelError}))
	sh, err := shop.Open(ctx, shop.Config{Placement: cfg, Backends: placement.Options{MongoURI: set.URI(), MongoDatabase: db}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sh.Close() })
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Services: sh.API(), AdminToken: "x", Logger: apiLog}))
	t.Cleanup(srv.Close)
	// A client waits longer than the fault: what is measured is the server's answer.
	client := &shopClient{base: srv.URL, http: &http.Client{Timeout: 45 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: shopUsers}}}

	now := time.Now().UTC().Truncate(time.Millisecond)
	for i := range 20 {
		p := catalog.Product{ID: fmt.Sprintf("shop-%d", i), Name: fmt.Sprintf("shop %d", i), Category: "faulttest",
			Price: money.Amount(100 * (i + 1)), Stock: map[string]int64{zone: shopStock}, CreatedAt: now, UpdatedAt: now}
		if err := sh.Stores.Products.CreateProduct(ctx, p); err != nil {
			t.Fatal(err)
		}
		client.products = append(client.products, p.ID)
	}
	users := make([]*shopper, shopUsers)
	var wg sync.WaitGroup
	errc := make(chan error, shopUsers)
	sem := make(chan struct{}, 8)
	for i := range users {
		users[i] = &shopper{i: i, rng: rand.New(rand.NewPCG(uint64(i), 27))}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			tok, err := client.register(ctx, i)
			users[i].token = tok
			errc <- err
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}

	// Open loop: an action is due every 1/shopRate s whatever the server does, given to an idle
	// shopper (a shopper's own actions are sequential, as a browser's are).
	idle := make(chan *shopper, shopUsers)
	for _, u := range users {
		idle <- u
	}
	var stop atomic.Bool
	var skipped atomic.Int64
	var running sync.WaitGroup
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		tick := time.NewTicker(time.Second / shopRate)
		defer tick.Stop()
		for !stop.Load() && ctx.Err() == nil {
			<-tick.C
			select {
			case u := <-idle:
				running.Add(1)
				go func() {
					defer running.Done()
					client.step(ctx, u)
					idle <- u
				}()
			default:
				skipped.Add(1)
			}
		}
	}()
	defer func() { stop.Store(true); <-loadDone; running.Wait() }()

	loadAt := time.Now()
	stopProbe := prober(ctx, db)
	if err := serverproc.Sleep(ctx, 4*time.Second); err != nil {
		t.Fatal(err)
	}
	victim := set.Primary(ctx)
	if victim < 0 {
		t.Fatal("no primary before the fault")
	}
	watch := newWatcher(t, ctx, victim)
	faultAt := time.Now()
	watch.faultAt = faultAt
	heal := inject(t, ctx, victim)

	// The fault counts only once a probe sees it: the victim's port no longer answers.
	if err := probeDown(ctx, set.Members()[victim].Host); err != nil {
		_ = heal()
		t.Fatalf("the fault did not take: %v", err)
	}
	verifiedIn := time.Since(faultAt)
	el, err := watch.election(ctx, faultAt.Add(faultFor))
	if err != nil {
		_ = heal()
		t.Fatal(err)
	}
	unreachableIn := watch.unreachable(ctx, faultAt.Add(faultFor))
	if err := serverproc.Sleep(ctx, time.Until(faultAt.Add(faultFor))); err != nil {
		t.Fatal(err)
	}
	if err := heal(); err != nil {
		t.Fatal(err)
	}
	healedAt := time.Now()
	steps := electionLog(faultAt)
	elections := strings.Count(steps, "Election succeeded")
	t.Logf("the members' logs, times from the fault (%d elections): %s", elections, steps)
	margin := stallMargin
	// Healthy again: every member up, member 0 primary (its priority takeover done), a
	// majority write acknowledged. Errors from here on count against the store.
	if err := restore(ctx); err != nil {
		t.Fatal(err)
	}
	setHealthyAt := time.Now()
	// ...and the shop's own driver writes to that primary (its monitors have found it): only
	// then is the shop healthy again. How long that takes after the set is, is bounded by the
	// store's ConnectTimeout (a dial left from the fault is abandoned) plus a monitor round.
	if err := appWritable(ctx, sh); err != nil {
		t.Fatal(err)
	}
	healthyAt := time.Now()
	appLag := healthyAt.Sub(setHealthyAt)
	if err := serverproc.Sleep(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	<-loadDone
	running.Wait()
	stopAt := time.Now()
	probes := stopProbe()
	// The set's own stall, as an independent client sees it: the longest gap between its
	// acknowledged majority writes (election, catch-up, discovery, and any further election
	// of a set that flaps), and its first write after the fault.
	setGap, setFrom, setTo := longestGap(probes)
	failover := time.Duration(-1)
	if i, _ := slices.BinarySearchFunc(probes, faultAt, func(a, b time.Time) int { return a.Compare(b) }); i < len(probes) {
		failover = probes[i].Sub(faultAt)
	}
	// Settle every order whose outcome the client never learned: retry its key until answered.
	settleDeadline := time.Now().Add(60 * time.Second)
	for _, u := range users {
		for u.pending != "" && time.Now().Before(settleDeadline) {
			client.order(ctx, u, u.pending)
			if u.pending != "" {
				_ = serverproc.Sleep(ctx, 500*time.Millisecond)
			}
		}
	}
	calls := client.hist.all()
	for _, u := range users {
		if u.pending != "" {
			t.Errorf("shopper %d: order key %s still unanswered after 60 s of retries; its attempts: %s", u.i, u.pending, attempts(calls, u.pending, faultAt, &causes))
		}
	}

	rep := analyse(calls, stopAt, faultAt, healedAt, healthyAt)
	t.Logf("%s of member %d at +%s (verified by probe in %s): member %d elected %s after the fault (its electionDate, term %d), first majority write acknowledged to an independent client %s after the fault, its longest gap %s (+%s to +%s); the others reported member %d unreachable after %s; healed after %s; healthy again (member 0 primary) %s after healing",
		name, victim, faultAt.Sub(loadAt).Round(time.Millisecond), verifiedIn.Round(time.Millisecond), el.member, el.after.Round(time.Millisecond), el.term,
		failover.Round(time.Millisecond), setGap.Round(time.Millisecond), setFrom.Sub(faultAt).Round(time.Millisecond), setTo.Sub(faultAt).Round(time.Millisecond), victim, unreachableIn, healedAt.Sub(faultAt).Round(time.Millisecond), healthyAt.Sub(healedAt).Round(100*time.Millisecond))
	t.Logf("the shop's driver wrote to the restored primary %s after the set was healthy again", appLag.Round(time.Millisecond))
	t.Logf("load: %d requests at %d actions/s over %s (%d actions skipped: no idle shopper), /proc/loadavg %s",
		len(calls), shopRate, time.Since(loadAt).Round(time.Second), skipped.Load(), loadavg())
	t.Logf("%s", rep)

	t.Logf("SHOPFAULT %s elections=%d longest_gap=%s set_gap=%s election=%s writable=%s p99_fault=%s max_fault=%s errors_fault=%d http500=%d http503=%d held=%d errors_after_healthy=%d app_lag=%s",
		name, elections, rep.gap.Round(time.Millisecond), setGap.Round(time.Millisecond), el.after.Round(time.Millisecond), failover.Round(time.Millisecond), rep.p99Fault.Round(time.Millisecond), rep.maxFault.Round(time.Millisecond),
		rep.errFault, rep.byStatus[500], rep.byStatus[503], rep.held, rep.errAfter, appLag.Round(time.Millisecond))

	if n := rep.byStatus[http.StatusInternalServerError]; n > 0 {
		var ids []string
		for _, c := range calls {
			if c.status == http.StatusInternalServerError {
				ids = append(ids, c.requestID)
			}
		}
		t.Errorf("%d requests answered 500; a transient state of the replica set must answer 503 with Retry-After; causes logged:\n%s", n, causesOf(&causes, ids, 5))
	}
	for _, c := range calls {
		if c.status == http.StatusServiceUnavailable && (c.retryAfter == "" || !strings.HasPrefix(c.contentType, "application/problem+json")) {
			t.Errorf("%s at +%s answered 503 without Retry-After or problem+json (Retry-After %q, Content-Type %q)",
				c.kind, c.start.Sub(faultAt).Round(time.Millisecond), c.retryAfter, c.contentType)
			break
		}
	}
	// The set's own stall (election, catch-up, discovery, any further election) is what the
	// shop may not stall much beyond.
	if limit := setGap + margin; rep.gap > limit {
		t.Errorf("longest gap between acknowledged writes %s (from +%s to +%s after the fault), want at most the set's own %s + %s",
			rep.gap.Round(time.Millisecond), rep.gapFrom.Sub(faultAt).Round(time.Millisecond), rep.gapTo.Sub(faultAt).Round(time.Millisecond), setGap.Round(time.Millisecond), margin)
	}
	if limit := store.ConnectTimeout + 2*time.Second; appLag > limit {
		t.Errorf("the shop's driver reached the restored primary %s after the set was healthy again, want at most ConnectTimeout + 2 s = %s",
			appLag.Round(time.Millisecond), limit)
	}
	if rep.errAfter > 0 {
		t.Errorf("%d requests started after the set was healthy again failed: %v; causes logged:\n%s", rep.errAfter, rep.afterExamples, causesOf(&causes, rep.afterIDs, 5))
	}
	if rep.acksAfter == 0 {
		t.Error("no write acknowledged after the set was healthy again: the load did not run through")
	}
	checkOrders(t, ctx, db, client)
	if t.Failed() {
		t.Logf("transactions open on the primary: %s", openTransactions(ctx))
		t.Logf("the API's error log, last lines:\n%s", causes.Tail(30))
	}
}

// appWritable writes through the shop's own stores (a fresh product each attempt, so an
// attempt that timed out but applied does not collide) until one is acknowledged.
func appWritable(ctx context.Context, sh *shop.Shop) error {
	for i := 0; ; i++ {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		now := time.Now().UTC().Truncate(time.Millisecond)
		err := sh.Stores.Products.CreateProduct(wctx, catalog.Product{ID: fmt.Sprintf("healthy-%d-%d", now.UnixNano(), i), Name: "healthy probe",
			Category: "faulttest-probe", Price: 1, Stock: map[string]int64{zone: 0}, CreatedAt: now, UpdatedAt: now})
		cancel()
		if err == nil {
			return nil
		}
		if err := serverproc.Sleep(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("the shop's driver wrote nothing once the set was healthy: %w", err)
		}
	}
}

// analysis is what the history shows.
type analysis struct {
	gap, p99Fault, maxFault time.Duration
	gapFrom, gapTo          time.Time
	byStatus                map[int]int
	errFault, errAfter      int
	held                    int
	acksAfter               int
	afterExamples           []string
	afterIDs                []string // request ids of the errors after healthy
	kinds                   map[string]int
}

func (a analysis) String() string {
	return fmt.Sprintf("answers by status %v (0: no answer); errors during the fault %d, after healthy %d; held retries (409 checkout-in-progress) %d; latency during the fault p99 %s, max %s; longest gap between acknowledged writes %s; error kinds %v",
		a.byStatus, a.errFault, a.errAfter, a.held, a.p99Fault.Round(time.Millisecond), a.maxFault.Round(time.Millisecond), a.gap.Round(time.Millisecond), a.kinds)
}

// analyse reads the history: the fault window is from the fault to its healing (requests
// started in it); "after" is requests started once the set was healthy again. Gaps are
// measured while the steady load ran (until stopAt), not over the settling retries after it.
func analyse(calls []call, stopAt, faultAt, healedAt, healthyAt time.Time) analysis {
	a := analysis{byStatus: map[int]int{}, kinds: map[string]int{}}
	var acks []time.Time
	var during []time.Duration
	for _, c := range calls {
		a.byStatus[c.status]++
		if c.ok() && c.end.Before(stopAt) {
			acks = append(acks, c.end)
			if !c.start.Before(healthyAt) {
				a.acksAfter++
			}
		}
		if !c.start.Before(faultAt) && c.start.Before(healedAt) {
			during = append(during, c.took())
		}
		switch {
		case c.ok():
		case c.held():
			a.held++
		default:
			a.kinds[fmt.Sprintf("%s %d %s%s", c.kind, c.status, c.problem, c.err)]++
			if c.start.Before(healthyAt) {
				a.errFault++
			} else {
				a.errAfter++
				a.afterIDs = append(a.afterIDs, c.requestID)
				if len(a.afterExamples) < 5 {
					a.afterExamples = append(a.afterExamples, fmt.Sprintf("%s %d %s%s", c.kind, c.status, c.problem, c.err))
				}
			}
		}
	}
	slices.SortFunc(acks, func(x, y time.Time) int { return x.Compare(y) })
	for i := 1; i < len(acks); i++ {
		if g := acks[i].Sub(acks[i-1]); g > a.gap {
			a.gap, a.gapFrom, a.gapTo = g, acks[i-1], acks[i]
		}
	}
	slices.Sort(during)
	if n := len(during); n > 0 {
		a.p99Fault, a.maxFault = during[(n*99)/100], during[n-1]
		if (n*99)/100 >= n {
			a.p99Fault = during[n-1]
		}
	}
	return a
}

// checkOrders: every acknowledged order is stored, one per Idempotency-Key, each stored order
// was acknowledged, and stock + units in stored orders = initial stock for every product.
func checkOrders(t *testing.T, ctx context.Context, db string, client *shopClient) {
	t.Helper()
	stored, err := allOrders(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]rawOrder{}
	perKey := map[string]int{}
	sold := map[string]int64{}
	for _, o := range stored {
		byID[o.ID] = o
		perKey[o.IdemKey]++
		for _, it := range o.Items {
			sold[it.ProductID] += it.Quantity
		}
	}
	acked := map[string]string{} // key → order id
	lost := 0
	for _, a := range client.orders {
		if prev, ok := acked[a.key]; ok && prev != a.id {
			t.Errorf("key %s acknowledged with two orders, %s and %s", a.key, prev, a.id)
		}
		acked[a.key] = a.id
		if o, ok := byID[a.id]; !ok || o.IdemKey != a.key {
			if lost++; lost <= 5 {
				t.Errorf("acknowledged order %s (key %s) not stored as such: %+v", a.id, a.key, o)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged orders lost", lost, len(client.orders))
	}
	for k, n := range perKey {
		if n != 1 {
			t.Errorf("%d orders under the Idempotency-Key %s", n, k)
		}
		if _, ok := acked[k]; !ok {
			t.Errorf("an order under key %s is stored but was never acknowledged", k)
		}
	}
	stock, err := stockOf(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range client.products {
		if stock[p]+sold[p] != shopStock {
			t.Errorf("product %s: stock %d + %d units in stored orders = %d, want %d", p, stock[p], sold[p], stock[p]+sold[p], shopStock)
		}
	}
	t.Logf("orders: %d acknowledged (%d keys), %d stored; units sold %d; stock adds up for %d products",
		len(client.orders), len(acked), len(stored), sumValues(sold), len(client.products))
}

func sumValues(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// prober measures when the set takes writes, as an independent client sees it: a majority
// insert is started every 100 ms (each given 3 s) until stop, and the moments they were
// acknowledged are returned, in order.
func prober(ctx context.Context, db string) (stop func() []time.Time) {
	var (
		mu   sync.Mutex
		acks []time.Time
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ictx, cancel := context.WithTimeout(ctx, 3*time.Second)
				defer cancel()
				if _, err := checker.Database(db).Collection("probe").InsertOne(ictx, bson.D{{Key: "at", Value: time.Now()}}); err == nil {
					mu.Lock()
					acks = append(acks, time.Now())
					mu.Unlock()
				}
			}()
		}
	}()
	return func() []time.Time {
		close(done)
		wg.Wait()
		slices.SortFunc(acks, func(a, b time.Time) int { return a.Compare(b) })
		return acks
	}
}

// longestGap is the longest interval between consecutive times in sorted ts, with its ends.
func longestGap(ts []time.Time) (gap time.Duration, from, to time.Time) {
	for i := 1; i < len(ts); i++ {
		if g := ts[i].Sub(ts[i-1]); g > gap {
			gap, from, to = g, ts[i-1], ts[i]
		}
	}
	return gap, from, to
}

// probeDown waits until a TCP connection to host can no longer be made or answered: a
// frozen mongod still accepts connections in the kernel but answers no hello, a cut port
// accepts none.
func probeDown(ctx context.Context, host string) error {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + host + "/?directConnection=true").
			SetServerSelectionTimeout(300 * time.Millisecond).SetConnectTimeout(300 * time.Millisecond))
		if err != nil {
			return err
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err = c.Database("admin").RunCommand(pctx, bson.D{{Key: "hello", Value: 1}}).Err()
		cancel()
		dctx, dcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_ = c.Disconnect(dctx)
		dcancel()
		if err != nil {
			return nil
		}
		if err := serverproc.Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s still answers hello 5 s after the fault", host)
}

// watcher asks the members other than the victim, each on a direct connection, what they see.
type watcher struct {
	victim  int
	faultAt time.Time
	clients map[int]*mongo.Client
}

func newWatcher(t *testing.T, ctx context.Context, victim int) *watcher {
	t.Helper()
	w := &watcher{victim: victim, clients: map[int]*mongo.Client{}}
	for i := range set.Members() {
		if i == victim {
			continue
		}
		c, err := mongo.Connect(options.Client().ApplyURI(set.MemberURI(i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
		w.clients[i] = c
	}
	return w
}

type memberStatus struct {
	Term    int64 `bson:"term"`
	Members []struct {
		ID           int       `bson:"_id"`
		State        string    `bson:"stateStr"`
		Health       float64   `bson:"health"`
		Self         bool      `bson:"self"`
		ElectionDate time.Time `bson:"electionDate"`
	} `bson:"members"`
}

func (w *watcher) status(ctx context.Context, i int) (memberStatus, error) {
	var st memberStatus
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := w.clients[i].Database("admin").RunCommand(sctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&st)
	return st, err
}

type election struct {
	member int
	after  time.Duration // fault → the new primary's electionDate
	term   int64
}

// election waits for another member to report itself PRIMARY and returns when it was elected
// (its electionDate, as replSetGetStatus reports it), measured from the fault.
func (w *watcher) election(ctx context.Context, until time.Time) (election, error) {
	for time.Now().Before(until) {
		for i := range w.clients {
			st, err := w.status(ctx, i)
			if err != nil {
				continue
			}
			for _, m := range st.Members {
				if m.Self && m.State == "PRIMARY" {
					return election{member: i, after: m.ElectionDate.Sub(w.faultAt), term: st.Term}, nil
				}
			}
		}
		if err := serverproc.Sleep(ctx, 50*time.Millisecond); err != nil {
			return election{}, err
		}
	}
	return election{}, fmt.Errorf("no other member became PRIMARY within the fault's %s", faultFor)
}

// unreachable says how long after the fault the other members reported the victim unreachable
// (health 0 in replSetGetStatus: after their heartbeat timeout), or that they had not by until.
func (w *watcher) unreachable(ctx context.Context, until time.Time) string {
	for time.Now().Before(until) {
		for i := range w.clients {
			if st, err := w.status(ctx, i); err == nil {
				for _, m := range st.Members {
					if m.ID == w.victim && m.Health == 0 {
						return time.Since(w.faultAt).Round(100 * time.Millisecond).String()
					}
				}
			}
		}
		if err := serverproc.Sleep(ctx, 100*time.Millisecond); err != nil {
			break
		}
	}
	return "not within the fault"
}

// electionLog picks the steps of the elections and catch-ups after since out of every member's
// log, each with its member and time from since: what the failover time is made of.
func electionLog(since time.Time) string {
	type step struct {
		at  time.Duration
		msg string
	}
	var steps []step
	for i, m := range set.Members() {
		b, err := os.ReadFile(m.LogPath())
		if err != nil {
			return err.Error()
		}
		for _, line := range strings.Split(string(b), "\n") {
			var e struct {
				T struct {
					Date time.Time `json:"$date"`
				} `json:"t"`
				Msg string `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &e) != nil || e.T.Date.Before(since) {
				continue
			}
			for _, key := range []string{"Starting an election", "Election succeeded", "atch-up", "atchup", "Caught up",
				"Transition to primary complete", "Stepping down", "priority takeover", "Starting to step down",
				"ync source", "oplog fetcher"} {
				if strings.Contains(e.Msg, key) {
					steps = append(steps, step{e.T.Date.Sub(since), fmt.Sprintf("m%d %s", i, e.Msg)})
					break
				}
			}
		}
	}
	slices.SortStableFunc(steps, func(a, b step) int { return int(a.at - b.at) })
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = fmt.Sprintf("+%s %s", s.at.Round(time.Millisecond), s.msg)
	}
	return strings.Join(out, "; ")
}

// causesOf is up to n lines of the API's error log naming one of the given request ids.
func causesOf(log *serverproc.Output, ids []string, n int) string {
	var out []string
	for _, line := range strings.Split(log.String(), "\n") {
		if len(out) < n && slices.ContainsFunc(ids, func(id string) bool { return id != "" && strings.Contains(line, "request_id="+id+" ") }) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// attempts lists the requests made under an order key, each with its start (from the fault),
// duration and answer, and the API's logged causes of those that failed.
func attempts(calls []call, key string, faultAt time.Time, causes *serverproc.Output) string {
	var out, ids []string
	for _, c := range calls {
		if c.key == key {
			out = append(out, fmt.Sprintf("+%s %s %d %s%s (id %s)", c.start.Sub(faultAt).Round(time.Millisecond), c.took().Round(time.Millisecond), c.status, c.problem, c.err, c.requestID))
			if !c.ok() {
				ids = append(ids, c.requestID)
			}
		}
	}
	return strings.Join(out, "; ") + "\n" + causesOf(causes, ids, 10)
}

// openTransactions lists the transactions the primary holds open (idle ones too), with their
// age and what they did: a transaction its client left behind keeps its writes' locks.
func openTransactions(ctx context.Context) string {
	// $currentOp runs at read concern local only (the checker reads at majority).
	admin := checker.Database("admin", options.Database().SetReadConcern(readconcern.Local()))
	cur, err := admin.Aggregate(ctx, mongo.Pipeline{
		{{Key: "$currentOp", Value: bson.D{{Key: "allUsers", Value: true}, {Key: "idleSessions", Value: true}}}},
		{{Key: "$match", Value: bson.D{{Key: "transaction", Value: bson.D{{Key: "$exists", Value: true}}}}}},
	})
	if err != nil {
		return err.Error()
	}
	var ops []bson.M
	if err := cur.All(ctx, &ops); err != nil {
		return err.Error()
	}
	out := make([]string, 0, len(ops))
	for _, op := range ops {
		out = append(out, fmt.Sprintf("%v active=%v desc=%v txn=%v cmd=%v wait=%v", op["type"], op["active"], op["desc"], op["transaction"], op["command"], op["waitingForLock"]))
	}
	return fmt.Sprintf("%d: %s", len(ops), strings.Join(out, "\n"))
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}
