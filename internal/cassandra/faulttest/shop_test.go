package faulttest

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/httpapi"
	"github.com/shardmart/shardmart/internal/loadgen"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/placement"
	"github.com/shardmart/shardmart/internal/serverproc"
	"github.com/shardmart/shardmart/internal/shop"
	store "github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// The shop as users meet it, on the 3-node cluster (RF 3): two shop processes (two shop
// instances, each with its own driver session, as two `serve` processes have) with carts,
// sessions, events, order history and the catalog read model on Cassandra and orders on one
// embedded store, serving the real HTTP API. Guests start a session through one process and
// edit their cart through the other at once (the cart answer prices its lines from the catalog
// on Cassandra), post a click, and buyers order; every request's start, end and answer is
// recorded, and the assertions read that record.

// shopPlacement puts every family Cassandra can hold on it.
const shopPlacement = "carts=cassandra,sessions=cassandra,events=cassandra,history=cassandra,catalog=cassandra"

const (
	shopZone     = "eu"
	shopProducts = 20
	// shopBuyers guests and as many buyers, each a client of its own.
	shopBuyers = 4
	// shopPace is each client's time per iteration (a guest's session, cart edit and click; a
	// buyer's cart edit and order): steady load, not saturation of the shared 2 cores, where
	// two shop processes, three nodes and a restarting one's JVM already run.
	shopPace = 200 * time.Millisecond
	// guestInFlight is how many visits one guest may have running at once.
	guestInFlight = 3
	// sessionTokens is how many tokens the cross-process session test issues, and logs in.
	sessionTokens = 1000
)

// Request kinds of the shop's load, as reported.
const (
	reqSession = "session create"
	reqCart    = "cart put"
	reqEvent   = "event"
	reqOrder   = "order"
)

var reqKinds = []string{reqSession, reqCart, reqEvent, reqOrder}

// shopProc is one shop process: its services and its HTTP API.
type shopProc struct {
	name     string
	sh       *shop.Shop
	base     string
	http     *http.Client
	causes   *serverproc.Output // the API's error log: the cause of every 5xx
	attempts *sync.Map          // callHeader value -> *attemptLog, shared by the pair
}

// callHeader carries a test request's id to the server side, which logs the attempts of every
// statement the request ran under it (store.WithAttemptLog): what a stall was waiting on.
const callHeader = "X-Test-Call"

// withAttempts is the test's middleware in front of the API.
func withAttempts(h http.Handler, logs *sync.Map) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get(callHeader); id != "" {
			l := &attemptLog{}
			logs.Store(id, l)
			r = r.WithContext(store.WithAttemptLog(r.Context(), l.add))
		}
		h.ServeHTTP(w, r)
	})
}

// shopPair is the two processes of one shop and the products they sell.
type shopPair struct {
	a, b     *shopProc
	products []string
}

// openShopPair opens two shop processes on one embedded order store, creates the products
// and projects them into the catalog on Cassandra, so a cart answer prices its lines there.
func openShopPair(t *testing.T, ctx context.Context) *shopPair {
	t.Helper()
	account.HashCost = bcrypt.MinCost
	pl, err := placement.Parse(shopPlacement)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "orders.db")
	attempts := &sync.Map{}
	open := func(name string) *shopProc {
		sh, err := shop.Open(ctx, shop.Config{Placement: pl, Logger: slog.New(slog.DiscardHandler), Backends: placement.Options{
			SQLitePath: db, CassandraHosts: cluster.Hosts(), CassandraKeyspace: keyspace}})
		if err != nil {
			t.Fatalf("shop %s: %v", name, err)
		}
		t.Cleanup(func() { _ = sh.Close() })
		causes := &serverproc.Output{}
		apiLog := slog.New(slog.NewTextHandler(causes, &slog.HandlerOptions{Level: slog.LevelError}))
		srv := httptest.NewServer(withAttempts(httpapi.New(httpapi.Deps{Services: sh.API(), AdminToken: "x", Logger: apiLog}), attempts))
		t.Cleanup(srv.Close)
		// A client waits longer than any fault: what is measured is the server's answer.
		return &shopProc{name: name, sh: sh, base: srv.URL, causes: causes, attempts: attempts,
			http: &http.Client{Timeout: opTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	}
	p := &shopPair{a: open("A"), b: open("B")}
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i := range shopProducts {
		pr := catalog.Product{ID: fmt.Sprintf("shop-%d-%d", now.UnixNano(), i), Name: fmt.Sprintf("product %d", i), Category: "faulttest",
			Price: money.Amount(100 * (i + 1)), Stock: map[string]int64{shopZone: 1_000_000}, CreatedAt: now, UpdatedAt: now}
		if err := p.a.sh.Stores.Products.CreateProduct(ctx, pr); err != nil {
			t.Fatal(err)
		}
		p.products = append(p.products, pr.ID)
	}
	if _, err := p.a.sh.Projector.Drain(ctx); err != nil {
		t.Fatalf("project the catalog: %v", err)
	}
	// Order history reaches Cassandra through the projector, as in serve.
	bg, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.a.sh.Projector.Run(bg, 200*time.Millisecond); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	return p
}

// reply is one HTTP request as the client saw it.
type reply struct {
	kind       string
	via        string
	path       string
	start, end time.Time
	status     int    // 0: no answer
	err        string // transport error
	problem    string // the problem's type and detail
	retryAfter string
	requestID  string
	attempts   *attemptLog // the statements it ran, when recorded
}

func (r reply) ok() bool { return r.status >= 200 && r.status < 300 }

// retryable is an answer a client retries as it is: 503 (with Retry-After) or 504, or no
// answer at all.
func (r reply) retryable() bool {
	return r.status == 0 || r.status == http.StatusServiceUnavailable || r.status == http.StatusGatewayTimeout
}

func (r reply) String() string {
	s := fmt.Sprintf("%s %s via %s at %s: %d", r.kind, r.path, r.via, r.start.Format("15:04:05.000"), r.status)
	if r.err != "" {
		s += " " + r.err
	}
	if r.problem != "" {
		s += " " + r.problem
	}
	if r.requestID != "" {
		s += " (request " + r.requestID + ")"
	}
	return s
}

// shopRecord is the record of one run.
type shopRecord struct {
	mu      sync.Mutex
	replies []reply
	lines   []ackedLine  // acknowledged guest cart lines
	orders  []ackedOrder // acknowledged orders
	issued  int          // sessions issued and used
}

type ackedLine struct {
	token, product string
	quantity       int64
}

type ackedOrder struct {
	buyer *buyer
	id    string
}

func (rec *shopRecord) add(r reply) {
	rec.mu.Lock()
	rec.replies = append(rec.replies, r)
	rec.mu.Unlock()
}

func (rec *shopRecord) all() []reply {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.replies)
}

// call sends one request through p; kind "" is not recorded (setup and checks).
func (p *shopProc) call(ctx context.Context, rec *shopRecord, kind, method, path, token string, body any, hdr ...string) (reply, []byte) {
	r := reply{kind: kind, via: p.name, path: method + " " + path}
	req, err := loadgen.NewRequest(ctx, method, p.base+path, token, body, hdr...)
	if err != nil {
		panic(err)
	}
	id := ""
	if kind != "" && rec != nil {
		id = fmt.Sprintf("%p-%d", rec, callSeq.Add(1))
		req.Header.Set(callHeader, id)
	}
	r.start = time.Now()
	resp, err := p.http.Do(req)
	var out []byte
	if err == nil {
		out, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		r.status, r.retryAfter, r.requestID = resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("X-Request-Id")
	}
	r.end = time.Now()
	if err != nil {
		r.err = err.Error()
	}
	if r.status >= 400 {
		var pr struct{ Type, Detail string }
		_ = json.Unmarshal(out, &pr)
		r.problem = pr.Type[strings.LastIndexByte(pr.Type, '/')+1:] + ": " + pr.Detail
	}
	if id != "" {
		if l, ok := p.attempts.LoadAndDelete(id); ok {
			r.attempts = l.(*attemptLog)
		}
		// A request cut short because the load was stopping says nothing about the shop.
		if ctx.Err() == nil {
			rec.add(r)
		}
	}
	return r, out
}

var callSeq atomic.Int64

// explainReplyGap logs the requests of any kind in flight during the gap of kind [from, to]
// (a client's requests run one after another, so one kind can wait on another), the longest
// first, with the attempts of their statements: which statement on which coordinator took the
// time.
func explainReplyGap(t *testing.T, rs []reply, kind string, from, to time.Time) {
	t.Helper()
	const maxLogged = 8
	var in []reply
	for _, r := range rs {
		if !r.end.Before(from) && !r.start.After(to) && r.end.Sub(r.start) > maxStall/4 {
			in = append(in, r)
		}
	}
	slices.SortFunc(in, func(a, b reply) int { return cmp.Compare(b.end.Sub(b.start), a.end.Sub(a.start)) })
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests over %s in flight during the %s gap %s-%s", len(in), maxStall/4, kind, from.Format("15:04:05.000"), to.Format("15:04:05.000"))
	for _, r := range in[:min(len(in), maxLogged)] {
		fmt.Fprintf(&b, "\n  %s +%s", r, r.end.Sub(r.start).Round(time.Millisecond))
		if r.attempts == nil {
			continue
		}
		attempts := r.attempts.list()
		slices.SortFunc(attempts, func(a, b store.Attempt) int { return a.Start.Compare(b.Start) })
		for _, a := range attempts {
			fmt.Fprintf(&b, "\n    %s", a)
		}
	}
	t.Log(b.String())
}

// untilAnswered repeats a request the shop answered "retry" (503, 504, no answer) until it
// answers anything else or the load stops, as a client honouring Retry-After does (the wait
// is shortened: the record is what is asserted, not the client's patience).
func untilAnswered(ctx context.Context, do func() (reply, []byte)) (reply, []byte) {
	for {
		r, b := do()
		if !r.retryable() || ctx.Err() != nil {
			return r, b
		}
		if serverproc.Sleep(ctx, 100*time.Millisecond) != nil {
			return r, b
		}
	}
}

// startToken issues a session through p.
func (p *shopProc) startToken(ctx context.Context, rec *shopRecord) (string, reply) {
	r, b := untilAnswered(ctx, func() (reply, []byte) { return p.call(ctx, rec, reqSession, "POST", "/v1/sessions", "", nil) })
	if r.status != http.StatusCreated {
		return "", r
	}
	var v struct{ Token string }
	_ = json.Unmarshal(b, &v)
	return v.Token, r
}

// putLine puts quantity of product in the token's cart through p and checks that the answer
// prices it (the catalog read on Cassandra).
func (p *shopProc) putLine(ctx context.Context, rec *shopRecord, token, product string, quantity int64) (reply, error) {
	r, b := untilAnswered(ctx, func() (reply, []byte) {
		return p.call(ctx, rec, reqCart, "PUT", "/v1/cart/items/"+url.PathEscape(product), token, map[string]int64{"quantity": quantity})
	})
	if !r.ok() {
		return r, nil
	}
	var v cartAnswer
	if err := json.Unmarshal(b, &v); err != nil {
		return r, err
	}
	for _, it := range v.Items {
		if it.ProductID == product && it.Quantity == quantity && it.Available {
			return r, nil
		}
	}
	return r, fmt.Errorf("cart answer %s does not price %d of %s", b, quantity, product)
}

// cartAnswer is the part of a cart answer the tests read.
type cartAnswer struct{ Items []cartLineAnswer }

type cartLineAnswer struct {
	ProductID string `json:"product_id"`
	Quantity  int64
	Available bool
}

// buyer is a registered user who orders through one process.
type buyer struct {
	via     *shopProc
	token   string
	seq     int
	pending string // an order's Idempotency-Key whose outcome is unknown
	placed  []string
}

func register(ctx context.Context, p *shopProc, email string) (string, error) {
	tok, r := p.startToken(ctx, nil)
	if tok == "" {
		return "", fmt.Errorf("start session: %s", r)
	}
	cred := map[string]string{"email": email, "password": "faulttest-password"}
	if r, b := p.call(ctx, nil, "", "POST", "/v1/users", tok, cred); r.status != http.StatusCreated {
		return "", fmt.Errorf("register: %s %s", r, b)
	}
	r, b := p.call(ctx, nil, "", "POST", "/v1/login", tok, cred)
	if r.status != http.StatusOK {
		return "", fmt.Errorf("login: %s %s", r, b)
	}
	var v struct{ Token string }
	_ = json.Unmarshal(b, &v)
	return v.Token, nil
}

// step is one order of the buyer: a line in the cart, then the order, retried under its key
// while the outcome is unknown.
func (u *buyer) step(ctx context.Context, rec *shopRecord, product string) error {
	if u.pending == "" {
		if r, err := u.via.putLine(ctx, rec, u.token, product, 1); err != nil || !r.ok() {
			return err
		}
		u.seq++
		u.pending = fmt.Sprintf("order-%d-%d", time.Now().UnixNano(), u.seq)
	}
	r, b := u.via.call(ctx, rec, reqOrder, "POST", "/v1/orders", u.token, map[string]string{"zone": shopZone}, "Idempotency-Key", u.pending)
	switch {
	case r.ok():
		var o struct{ ID string }
		_ = json.Unmarshal(b, &o)
		rec.mu.Lock()
		rec.orders = append(rec.orders, ackedOrder{buyer: u, id: o.ID})
		rec.mu.Unlock()
		u.pending = ""
	case r.retryable() || r.status == http.StatusConflict && strings.HasPrefix(r.problem, "checkout-in-progress"):
		// Unknown outcome: the next step retries the same key.
	default:
		u.pending = ""
	}
	return nil
}

// shopLoadRun is the load of one run: guests across the two processes, buyers on one each.
type shopLoadRun struct {
	pair   *shopPair
	rec    shopRecord
	buyers []*buyer
	mu     sync.Mutex
	bad    []string // wrong answers (a cart not priced): failures whatever the fault
}

func startShopLoad(t *testing.T, ctx context.Context, pair *shopPair) (*shopLoadRun, func()) {
	t.Helper()
	l := &shopLoadRun{pair: pair}
	// Buyers order through A only: the two instances share one embedded order store, whose
	// outbox has no drain lease across processes (serve refuses a second process on one data
	// directory), so orders through both would have two projectors apply the same follow-ups at
	// once, contending for the same carts' Paxos rounds as no production shop does.
	for i := range shopBuyers {
		via := pair.a
		tok, err := register(ctx, via, fmt.Sprintf("buyer-%d-%d@example.com", time.Now().UnixNano(), i))
		if err != nil {
			t.Fatal(err)
		}
		l.buyers = append(l.buyers, &buyer{via: via, token: tok})
	}
	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// Guests and buyers are separate clients, so a request kind stalls only on its own path.
	for c := range shopBuyers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			l.guest(loadCtx, c)
		}()
		go func() {
			defer wg.Done()
			l.buy(loadCtx, c)
		}()
	}
	return l, func() { stop(); wg.Wait() }
}

func (l *shopLoadRun) wrong(format string, args ...any) {
	l.mu.Lock()
	l.bad = append(l.bad, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// guest runs guest c: each tick starts a visit (visit), unless guestInFlight of its visits are
// still running. A visit is sequential (the token must be used at once), but visits overlap,
// so one slow cart edit does not hold back the next visit's session or click: a request kind's
// longest gap measures that kind's own stall.
func (l *shopLoadRun) guest(ctx context.Context, c int) {
	tick := time.NewTicker(shopPace)
	defer tick.Stop()
	slots := make(chan struct{}, guestInFlight)
	var visits sync.WaitGroup
	defer visits.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case slots <- struct{}{}:
		default:
			continue // every slot busy: the load stays paced, not piled up
		}
		visits.Add(1)
		go func() {
			defer func() { <-slots; visits.Done() }()
			l.visit(ctx, c, i)
		}()
	}
}

// visit starts a session through one process and, through the other at once, puts a line in
// its cart and posts a click.
func (l *shopLoadRun) visit(ctx context.Context, c, i int) {
	// A guest's session is issued by one process and used at once by the other.
	issuer, user := l.pair.a, l.pair.b
	if (c+i)%2 == 1 {
		issuer, user = user, issuer
	}
	product := l.pair.products[(c*7+i)%len(l.pair.products)]
	tok, _ := issuer.startToken(ctx, &l.rec)
	if tok == "" {
		return
	}
	quantity := int64(i%5 + 1)
	r, err := user.putLine(ctx, &l.rec, tok, product, quantity)
	switch {
	case err != nil:
		l.wrong("%s: %v", r, err)
	case r.ok():
		l.rec.mu.Lock()
		l.rec.lines = append(l.rec.lines, ackedLine{token: tok, product: product, quantity: quantity})
		l.rec.issued++
		l.rec.mu.Unlock()
	}
	untilAnswered(ctx, func() (reply, []byte) {
		return user.call(ctx, &l.rec, reqEvent, "POST", "/v1/events", tok, map[string]string{"type": "click", "product_id": product})
	})
}

// buy runs buyer c: an order step per tick.
func (l *shopLoadRun) buy(ctx context.Context, c int) {
	tick := time.NewTicker(shopPace)
	defer tick.Stop()
	u := l.buyers[c]
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := u.step(ctx, &l.rec, l.pair.products[(c*3+i)%len(l.pair.products)]); err != nil {
			l.wrong("buyer %d: %v", c, err)
		}
	}
}

// longestGap is the longest time within [from, to] in which no request of kind was answered
// 2xx, counting from `from` to the first such answer and from the last to `to`.
func longestReplyGap(rs []reply, kind string, from, to time.Time) (time.Duration, time.Time) {
	var acks []time.Time
	for _, r := range rs {
		if r.kind == kind && r.ok() && !r.end.Before(from) && !r.end.After(to) {
			acks = append(acks, r.end)
		}
	}
	slices.SortFunc(acks, func(a, b time.Time) int { return a.Compare(b) })
	prev, worst, at := from, time.Duration(0), from
	for _, a := range append(acks, to) {
		if g := a.Sub(prev); g > worst {
			worst, at = g, prev
		}
		prev = a
	}
	return worst, at
}

// shopFault is a sequence of faults; run returns once the cluster is back to every node
// answering (the test then waits for the ring and the driver).
type shopFault struct {
	name string
	// slack is added to every bound: a rolling restart is three faults in a row, and in a CI
	// run at load 30 one of its restarts stalled guests 2.00 s and orders 0.16 s over theirs.
	slack time.Duration
	run   func(t *testing.T, ctx context.Context) error
}

// warmBefore is how many 2xx answers of each request kind the load gets before the fault: an
// order's bound adds its p99 before the fault, which needs orders to measure (at load 20 an
// order takes 1-2 s, so a fixed warm-up of 3 s saw none).
const warmBefore = 20

// warmUp waits for the warm-up (at least warmup long) until every request kind has had
// warmBefore 2xx answers, for at most 2 minutes.
func warmUp(ctx context.Context, load *shopLoadRun) error {
	if err := sleepCtx(ctx, warmup); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return eventually.Until(ctx, func() error {
		ok := map[string]int{}
		for _, r := range load.rec.all() {
			if r.ok() {
				ok[r.kind]++
			}
		}
		for _, k := range reqKinds {
			if ok[k] < warmBefore {
				return fmt.Errorf("warm-up: %d %s answered 2xx, want %d", ok[k], k, warmBefore)
			}
		}
		return nil
	})
}

// runShopFault runs the shop's load through warm-up, the fault sequence, the settling of the
// cluster and a cool-down, then asserts: no 500 at any time; no fresh token refused; no
// request kind without a 2xx answer for more than maxStall (for orders: maxStall beyond an
// order's p99 before the fault); every request started after the
// cluster settled answered 2xx; every acknowledged cart line and order read back through the
// API.
func runShopFault(t *testing.T, f shopFault) {
	ctx := startSick(t) // the tables as the shop has them
	pair := openShopPair(t, ctx)
	load, stopLoad := startShopLoad(t, ctx, pair)
	defer stopLoad()
	if err := warmUp(ctx, load); err != nil {
		t.Fatal(err)
	}
	faultAt := time.Now()
	if err := f.run(t, ctx); err != nil {
		logRingViews(t)
		t.Fatalf("%s: %v", f.name, err)
	}
	healedAt := time.Now()
	if err := converge(t, ctx); err != nil {
		logRingViews(t)
		t.Fatalf("%s: the ring did not converge: %v", f.name, err)
	}
	for i := range cluster.Nodes() {
		if err := waitDriverUp(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	settledAt := time.Now()
	if err := sleepCtx(ctx, cooldown); err != nil {
		t.Fatal(err)
	}
	stopLoad()
	endAt := time.Now()

	rs := load.rec.all()
	var fivehundreds, refused, unsettled []reply
	retried := map[int]int{}
	for _, r := range rs {
		switch {
		case r.status >= 500 && !r.retryable():
			fivehundreds = append(fivehundreds, r)
		case r.status == http.StatusUnauthorized:
			refused = append(refused, r)
		}
		if r.retryable() {
			retried[r.status]++
		}
		if !r.ok() && r.start.After(settledAt) {
			unsettled = append(unsettled, r)
		}
	}
	report := func(what string, list []reply) {
		t.Helper()
		if len(list) == 0 {
			return
		}
		var lines []string
		for _, r := range list[:min(len(list), 5)] {
			lines = append(lines, r.String())
		}
		t.Errorf("%s: %d %s, first:\n  %s", f.name, len(list), what, strings.Join(lines, "\n  "))
	}
	report("answers 5xx other than 503/504", fivehundreds)
	if len(fivehundreds) > 0 {
		t.Logf("the API's logged causes:\n%s", pair.a.causes.String()+pair.b.causes.String())
	}
	report("requests refused 401 (a session not found)", refused)
	report("requests failed after the cluster settled", unsettled)
	for _, w := range load.bad[:min(len(load.bad), 5)] {
		t.Errorf("%s: wrong answer: %s", f.name, w)
	}
	// A checkout is several steps (a cart read, lightweight transactions, the order store, up to
	// DefaultSyncWait for its follow-ups): on these 2 cores its healthy p99 is already around a
	// second, so what the fault may add to it is bounded, not the time between two orders.
	var gaps, before []string
	for _, k := range reqKinds {
		var took []time.Duration
		for _, r := range rs {
			if r.kind == k && r.ok() && r.end.Before(faultAt) {
				took = append(took, r.end.Sub(r.start))
			}
		}
		slices.Sort(took)
		limit := maxStall + f.slack
		if len(took) > 0 {
			p99 := took[len(took)*99/100]
			before = append(before, fmt.Sprintf("%s p50 %s p99 %s", k, took[len(took)/2].Round(time.Millisecond), p99.Round(time.Millisecond)))
			if k == reqOrder {
				limit += p99
			}
		}
		if k == reqOrder {
			// A checkout whose cart freeze a fault left with an unknown outcome holds the cart
			// for its lease: the buyer's retry, with the same key but a new order id, cannot
			// take the freeze over and is answered checkout-in-progress until the lease ends
			// (docs/limits.md). Seen once, after a SIGKILL at load 26: 32.3 s.
			limit = max(limit, cart.CheckoutLease+maxStall)
		}
		g, at := longestReplyGap(rs, k, faultAt, endAt)
		if g > limit {
			explainReplyGap(t, rs, k, at, at.Add(g))
			t.Errorf("%s: no %s answered 2xx for %s from %s (limit %s)", f.name, k, g.Round(10*time.Millisecond), at.Format("15:04:05.000"), limit.Round(time.Millisecond))
		}
		gaps = append(gaps, fmt.Sprintf("%s %s (limit %s)", k, g.Round(10*time.Millisecond), limit.Round(time.Millisecond)))
	}
	t.Logf("%s: faults %s, settled %s after; %d requests, retry answers %v; %d sessions issued and used at once through the other process; before the fault: %s; longest stall: %s; load %s",
		f.name, healedAt.Sub(faultAt).Round(100*time.Millisecond), settledAt.Sub(healedAt).Round(100*time.Millisecond),
		len(rs), retried, load.rec.issued, strings.Join(before, ", "), strings.Join(gaps, ", "), loadavg())
	lost := shopLost(t, ctx, load)
	t.Logf("%s: %d cart lines and %d orders acknowledged; %d lost", f.name, len(load.rec.lines), len(load.rec.orders), lost)
	if lost > 0 {
		t.Errorf("%s: %d acknowledged writes not read back", f.name, lost)
	}
}

// shopLost reads every acknowledged cart line (GET /v1/cart with its token, through process
// A) and every acknowledged order (in its buyer's history once the projector has caught up)
// back through the API, and counts those missing.
func shopLost(t *testing.T, ctx context.Context, l *shopLoadRun) int {
	t.Helper()
	// The lines are read back by readBackWorkers at once: a rolling restart acknowledges
	// thousands, one GET each. A read that cannot be made (the test's budget ran out) is no
	// proof of a loss, so it fails the test as unchecked, not as lost.
	const readBackWorkers = 8
	var (
		mu              sync.Mutex
		lost, unchecked int
		next            atomic.Int64
		wg              sync.WaitGroup
	)
	for range readBackWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(l.rec.lines); i = int(next.Add(1)) - 1 {
				line := l.rec.lines[i]
				r, b := untilAnswered(ctx, func() (reply, []byte) { return l.pair.a.call(ctx, nil, "", "GET", "/v1/cart", line.token, nil) })
				var v cartAnswer
				_ = json.Unmarshal(b, &v)
				mu.Lock()
				switch {
				case r.status == 0 && ctx.Err() != nil:
					unchecked++
				case !r.ok() || !slices.ContainsFunc(v.Items, func(it cartLineAnswer) bool {
					return it.ProductID == line.product && it.Quantity == line.quantity
				}):
					lost++
					if lost <= 5 {
						t.Logf("lost cart line %s x%d: %s %s", line.product, line.quantity, r, b)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if unchecked > 0 {
		t.Errorf("%d acknowledged cart lines not read back before the test's budget ran out: unchecked", unchecked)
	}
	if _, err := l.pair.a.sh.Projector.Drain(ctx); err != nil {
		t.Errorf("drain the outbox: %v", err)
	}
	for _, u := range l.buyers {
		seen, listed := map[string]bool{}, true
		for cursor := ""; ; {
			path := "/v1/orders?limit=100"
			if cursor != "" {
				path += "&cursor=" + url.QueryEscape(cursor)
			}
			r, b := untilAnswered(ctx, func() (reply, []byte) { return u.via.call(ctx, nil, "", "GET", path, u.token, nil) })
			if !r.ok() {
				t.Errorf("list orders: %s %s", r, b) // unchecked, not lost
				listed = false
				break
			}
			var page struct {
				Items []struct{ ID string }
				Next  string `json:"next_cursor"`
			}
			_ = json.Unmarshal(b, &page)
			for _, o := range page.Items {
				seen[o.ID] = true
			}
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		for _, o := range l.rec.orders {
			if listed && o.buyer == u && !seen[o.id] {
				lost++
				t.Logf("order %s acknowledged, not in its buyer's history", o.id)
			}
		}
	}
	return lost
}

// cqlListening and peerUp are the lines of a node's system.log that say when it opened its
// native port and when it saw a peer come up.
var (
	cqlListening = regexp.MustCompile(`^\S+\s+\[[^\]]*\] (\S+ \S+) .*Starting listening for CQL clients`)
	peerUp       = regexp.MustCompile(`^\S+\s+\[[^\]]*\] (\S+ \S+) .*InetAddress /([0-9.]+):\d+ is now UP`)
)

// restartChecked restarts node i and checks, from its log, that it opened its native port
// only after it had seen every other node up: no client could reach it before its peers were
// up in its own view.
func restartChecked(t *testing.T, ctx context.Context, i int) error {
	t.Helper()
	n := cluster.Nodes()[i]
	from := serverproc.LogSize(n.SystemLog())
	if err := cluster.StartNode(ctx, i); err != nil {
		return err
	}
	f, err := os.Open(n.SystemLog())
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return err
	}
	up := map[string]string{}
	listening := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if m := peerUp.FindStringSubmatch(sc.Text()); m != nil && listening == "" {
			up[m[2]] = m[1]
		}
		if m := cqlListening.FindStringSubmatch(sc.Text()); m != nil && listening == "" {
			listening = m[1]
		}
	}
	if listening == "" {
		return fmt.Errorf("node %d: no \"Starting listening for CQL clients\" in its log since the restart", i+1)
	}
	for j, m := range cluster.Nodes() {
		if j == i {
			continue
		}
		if up[m.Addr] == "" {
			t.Errorf("node %d opened its native port at %s before it saw node %d (%s) up", i+1, listening, j+1, m.Addr)
		}
	}
	t.Logf("node %d restarted: peers up at %v, native port open at %s", i+1, up, listening)
	return nil
}

// TestShopSurvivesKillRestartAndFreeze: node 2 is SIGKILLed while it coordinates requests,
// restarted, and as soon as every node sees it UN again node 3 is frozen (SIGSTOP) for 15 s.
func TestShopSurvivesKillRestartAndFreeze(t *testing.T) {
	// The slack: requests in flight on a SIGKILLed coordinator stalled every kind 4.4-6.0 s at
	// load 26 (a CI-like run), 0.6-1.0 s at load 24 and 0.6-2.1 s at load 13-18 in others;
	// the cause of the long ones is not known yet (docs/evidence/robustness.md).
	runShopFault(t, shopFault{name: "kill, restart, freeze another", slack: 6 * time.Second, run: func(t *testing.T, ctx context.Context) error {
		if err := cluster.KillNode(ctx, n2); err != nil {
			return err
		}
		t.Logf("node 2 killed at %s", time.Now().Format("15:04:05.000"))
		t.Cleanup(func() { _ = cluster.ResumeNode(n3) })
		// Down long enough for the others to see it down: its hints build up.
		if err := sleepCtx(ctx, 5*time.Second); err != nil {
			return err
		}
		if err := restartChecked(t, ctx, n2); err != nil {
			return err
		}
		if err := converge(t, ctx); err != nil {
			return err
		}
		if err := cluster.PauseNode(n3); err != nil {
			return err
		}
		t.Logf("node 3 frozen at %s", time.Now().Format("15:04:05.000"))
		if err := sleepCtx(ctx, faultHold); err != nil {
			return err
		}
		t.Logf("node 3 resumed at %s", time.Now().Format("15:04:05.000"))
		return cluster.ResumeNode(n3)
	}})
}

// TestShopSurvivesRollingRestart restarts the three nodes one by one (SIGTERM: Cassandra
// drains and tells its peers), each once the ring sees the previous one UN again.
func TestShopSurvivesRollingRestart(t *testing.T) {
	runShopFault(t, shopFault{name: "rolling restart", slack: time.Second, run: func(t *testing.T, ctx context.Context) error {
		for _, i := range []int{n1, n2, n3} {
			if err := cluster.StopNode(ctx, i); err != nil {
				return err
			}
			t.Logf("node %d stopped at %s", i+1, time.Now().Format("15:04:05.000"))
			if err := restartChecked(t, ctx, i); err != nil {
				return err
			}
			if err := converge(t, ctx); err != nil {
				return err
			}
		}
		return nil
	}})
}

// TestSessionTokensWorkAcrossProcesses: a token issued through one process is accepted by the
// other on the very next request, sessionTokens times in parallel; the same for the token a
// login hands out (the guest's is revoked, the new one must work at once).
func TestSessionTokensWorkAcrossProcesses(t *testing.T) {
	ctx := startSick(t)
	pair := openShopPair(t, ctx)
	product := pair.products[0]
	var mu sync.Mutex
	var refused, failed []string
	count := func(list *[]string, s string) {
		mu.Lock()
		*list = append(*list, s)
		mu.Unlock()
	}
	parallel := func(n int, fn func(i int)) {
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				fn(i)
			}()
		}
		wg.Wait()
	}
	use := func(via *shopProc, tok, what string) {
		r, err := via.putLine(ctx, nil, tok, product, 1)
		switch {
		case r.status == http.StatusUnauthorized:
			count(&refused, what+": "+r.String())
		case err != nil || !r.ok():
			count(&failed, fmt.Sprintf("%s: %s %v", what, r, err))
		}
	}
	issued := time.Now()
	parallel(sessionTokens, func(i int) {
		tok, r := pair.a.startToken(ctx, nil)
		if tok == "" {
			count(&failed, "issue: "+r.String())
			return
		}
		use(pair.b, tok, "fresh token")
	})
	t.Logf("%d tokens issued through A and used at once through B in %s: %d refused, %d failed otherwise; load %s",
		sessionTokens, time.Since(issued).Round(100*time.Millisecond), len(refused), len(failed), loadavg())
	loginsAt := time.Now()
	stamp := time.Now().UnixNano()
	parallel(sessionTokens, func(i int) {
		tok, err := register(ctx, pair.a, fmt.Sprintf("rotate-%d-%d@example.com", stamp, i))
		if err != nil {
			if strings.Contains(err.Error(), ": 401") {
				count(&refused, "register or login through the issuing process: "+err.Error())
			} else {
				count(&failed, err.Error())
			}
			return
		}
		use(pair.b, tok, "token from a login")
	})
	t.Logf("%d logins through A, each new token used at once through B, in %s; load %s",
		sessionTokens, time.Since(loginsAt).Round(100*time.Millisecond), loadavg())
	for _, list := range []struct {
		what string
		l    []string
	}{{"refused (401)", refused}, {"failed", failed}} {
		if len(list.l) > 0 {
			t.Errorf("%d requests %s, first: %s", len(list.l), list.what, strings.Join(list.l[:min(5, len(list.l))], "; "))
		}
	}
}
