package loadgen_test

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// apiServer is the real API on a temporary embedded store with 500 demo products, no limits.
func apiServer(t *testing.T) *httptest.Server {
	t.Helper()
	return apiServerWith(t, httpapi.Deps{})
}

// apiServerWith is apiServer with d's settings (its services, token and logger are set here).
func apiServerWith(t *testing.T, d httpapi.Deps) *httptest.Server {
	t.Helper()
	account.HashCost = bcrypt.MinCost
	ctx := context.Background()
	s, err := shop.Open(ctx, shop.Config{Backends: placement.Options{SQLitePath: filepath.Join(t.TempDir(), "l.db")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	opt := demo.Defaults()
	opt.Products, opt.Users = 500, 0
	if _, err := demo.Seed(ctx, s.Stores, s.Orders, s.Carts, opt); err != nil {
		t.Fatal(err)
	}
	d.Services, d.AdminToken, d.Logger = s.API(), "x", slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(httpapi.New(d))
	t.Cleanup(srv.Close)
	return srv
}

func shopConfig(srv *httptest.Server, scenario string) loadgen.Config {
	return loadgen.Config{BaseURL: srv.URL, Client: srv.Client(), AdminToken: "x", Scenario: scenario, Users: 20, Seed: 7,
		ZipfS: 1.1, Categories: []string{"electronics", "books", "clothing"}, PerCategory: 50, Zone: demo.Zones[0],
		FlashProducts: 2, FlashStock: 15}
}

// TestMixProportions: over 100,000 requests drawn with a fixed seed, each kind's share is
// within 0.5 percentage points of the mix, and users and products are Zipf-skewed (the most
// popular far above an even share).
func TestMixProportions(t *testing.T) {
	srv := apiServer(t)
	s, err := loadgen.Prepare(context.Background(), shopConfig(srv, loadgen.ScenarioMix))
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	count := map[string]int{}
	for i := range n {
		count[s.Next(i).Kind]++
	}
	total := 0.0
	for _, w := range loadgen.DefaultMix {
		total += w.Share
	}
	for _, w := range loadgen.DefaultMix {
		got, want := 100*float64(count[w.Kind])/n, 100*w.Share/total
		if math.Abs(got-want) > 0.5 {
			t.Errorf("%s: %.2f %% of requests, want %.2f %%", w.Kind, got, want)
		}
	}
	if len(count) != len(loadgen.DefaultMix) {
		t.Errorf("kinds drawn: %v", count)
	}
	// The picker alone, too: the same seed gives the same sequence.
	p := loadgen.NewPicker(loadgen.DefaultMix)
	a, b := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		if p.Pick(a) != p.Pick(b) {
			t.Fatal("same seed, different kinds")
		}
	}
}

// TestMixRunsCleanly runs the whole mix against the real API: every kind is sent and none
// fails, so the bench's figures are of working requests.
func TestMixRunsCleanly(t *testing.T) {
	srv := apiServer(t)
	ctx := context.Background()
	s, err := loadgen.Prepare(ctx, shopConfig(srv, loadgen.ScenarioMix))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := loadgen.Run(ctx, loadgen.Schedule{Rate: 300, Duration: 1500 * time.Millisecond, MaxInFlight: 2000}, s.Next)
	if err != nil {
		t.Fatal(err)
	}
	var buf strings.Builder
	_ = rep.WriteText(&buf)
	t.Log("\n" + buf.String())
	if len(rep.Types) != len(loadgen.DefaultMix) {
		t.Errorf("kinds in the report: %d, want %d", len(rep.Types), len(loadgen.DefaultMix))
	}
	for _, st := range append(rep.Types, rep.Total) {
		if st.Failed != 0 || st.Dropped != 0 || st.OK == 0 {
			t.Errorf("%s: %d ok, %d failed, %d dropped (first error: %s)", st.Type, st.OK, st.Failed, st.Dropped, st.FirstError)
		}
	}
}

// TestFlashSaleNeverOversells: 20 buyers after 2 products of 15 units, 90 checkouts a second.
// Every unit confirmed in an order was in stock, the stock read back through the API is what
// was there less what was confirmed, and sold-out answers (409) count as expected, not errors.
func TestFlashSaleNeverOversells(t *testing.T) {
	srv := apiServer(t)
	ctx := context.Background()
	s, err := loadgen.Prepare(ctx, shopConfig(srv, loadgen.ScenarioFlashSale))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := loadgen.Run(ctx, loadgen.Schedule{Rate: 300, Duration: 1500 * time.Millisecond, MaxInFlight: 256}, s.Next)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := s.CheckFlashSale(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fc.StockBefore != 30 || fc.Oversold || !fc.Consistent || fc.UnitsSold > 30 || fc.StockAfter < 0 {
		t.Fatalf("flash sale: %+v", fc)
	}
	var checkout loadgen.Stats
	for _, st := range rep.Types {
		if st.Type == loadgen.Checkout {
			checkout = st
		}
	}
	if rep.Total.Failed != 0 || checkout.OK != fc.Orders {
		t.Errorf("failed %d (first: %s); checkouts ok %d, orders counted %d", rep.Total.Failed, rep.Total.FirstError, checkout.OK, fc.Orders)
	}
	// Once the stock is gone every further checkout is refused: 409s, reported as expected.
	if fc.StockAfter == 0 && checkout.Expected == 0 {
		t.Errorf("sold out but no expected 409s: %+v", checkout)
	}
	t.Logf("sold %d of %d units in %d orders; %d checkouts refused as sold out", fc.UnitsSold, fc.StockBefore, fc.Orders, checkout.Expected)
}

// TestRoundRobinOverProcesses: with several base URLs every request goes to the next one in
// turn, setup included, as a round-robin balancer in front of several API processes would.
func TestRoundRobinOverProcesses(t *testing.T) {
	api := apiServer(t)
	var hits [2]atomic.Int64
	var urls []string
	for i := range hits {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			api.Config.Handler.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	cfg := shopConfig(api, loadgen.ScenarioMix)
	cfg.BaseURL, cfg.BaseURLs = "", urls
	s, err := loadgen.Prepare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 { // one at a time: the test is about where requests go, not how fast
		op := s.Next(i)
		if outcome, why := op.Do(context.Background()); outcome == loadgen.Failed {
			t.Fatalf("%s through two front ends of one shop: %s", op.Kind, why)
		}
	}
	a, b := hits[0].Load(), hits[1].Load()
	// Product discovery (one request per category) goes to the first; every other request
	// (setup, the run, a checkout's follow-ups) takes the next URL in turn.
	if extra := a - b - int64(len(cfg.Categories)); a+b < 300 || extra < 0 || extra > 1 {
		t.Errorf("requests: %d to the first, %d to the second; want them alternating", a, b)
	}
}

// TestAnswersReadWholeAndFailuresNamed: a listing's answer is read to its end before the
// request counts as done (its latency holds the whole body), and an answer with another status
// fails naming the request, the status and the body.
func TestAnswersReadWholeAndFailuresNamed(t *testing.T) {
	api := apiServer(t)
	const tail = 150 * time.Millisecond
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/v1/products") || r.URL.Query().Get("category") == "" {
			api.Config.Handler.ServeHTTP(w, r)
			return
		}
		if fail.Load() {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"title":"store unavailable"}`))
			return
		}
		rec := httptest.NewRecorder()
		api.Config.Handler.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		time.Sleep(tail)
		_, _ = w.Write(body[len(body)/2:])
	}))
	t.Cleanup(srv.Close)
	cfg := shopConfig(api, loadgen.ScenarioMix)
	cfg.BaseURL, cfg.Client = srv.URL, srv.Client()
	s, err := loadgen.Prepare(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	browses := 0
	for i := 0; browses < 2; i++ {
		op := s.Next(i)
		if op.Kind != loadgen.Browse {
			continue
		}
		browses++
		fail.Store(browses == 2)
		start := time.Now()
		outcome, why := op.Do(context.Background())
		took := time.Since(start)
		if browses == 1 {
			if outcome != loadgen.OK || took < tail {
				t.Errorf("browse: %v (%s) after %s; want OK after the body's last part, %s in", outcome, why, took, tail)
			}
			continue
		}
		if outcome != loadgen.Failed || !strings.Contains(why, "GET /v1/products?category=") ||
			!strings.Contains(why, "status 503") || !strings.Contains(why, "store unavailable") {
			t.Errorf("browse answered 503: %v, %q; want a failure naming the request, status and body", outcome, why)
		}
	}
}

// TestCheckoutTimesItsOwnRequest: a checkout of an empty cart adds an item first. That put is
// a cart edit: recorded in the cart row and timed there, while the checkout's latency is the
// order request's alone. A server whose cart edits take 40 ms and orders no delay shows it:
// every checkout fills its cart (each leaves it empty), so the cart row counts one edit per
// checkout, all at 40 ms or more, and no checkout takes that long.
func TestCheckoutTimesItsOwnRequest(t *testing.T) {
	api := apiServer(t)
	const cartDelay = 40 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/cart/items/") {
			time.Sleep(cartDelay) // a slow cart store, as the test's premise
		}
		api.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rep := runMix(t, srv, loadgen.WorkloadPopulation, 30, loadgen.Mix{{Kind: loadgen.Checkout, Share: 1}},
		loadgen.Schedule{Rate: 50, Duration: time.Second, MaxInFlight: 30})
	var buf strings.Builder
	_ = rep.WriteText(&buf)
	t.Log("\n" + buf.String())
	rows := map[string]loadgen.Stats{}
	for _, st := range rep.Types {
		rows[st.Type] = st
	}
	co, ct := rows[loadgen.Checkout], rows[loadgen.Cart]
	if co.OK == 0 || co.Failed != 0 || ct.Failed != 0 {
		t.Fatalf("checkout %d ok, %d failed; cart %d failed (first errors: %q, %q)", co.OK, co.Failed, ct.Failed, co.FirstError, ct.FirstError)
	}
	if ct.OK != co.OK+co.Expected || ct.Sent != ct.OK {
		t.Errorf("cart row: %d sent, %d ok; want one edit per checkout (%d)", ct.Sent, ct.OK, co.OK+co.Expected)
	}
	if ms := float64(cartDelay.Milliseconds()); ct.P50 < ms || co.Max >= ms {
		t.Errorf("cart p50 %.1f ms (want ≥ %.0f), checkout max %.1f ms (want < %.0f): the edit's time is counted where it belongs", ct.P50, ms, co.Max, ms)
	}
	if rep.Total.Sent != co.Sent+ct.Sent || rep.ExtraRequests != ct.Sent {
		t.Errorf("total sent %d, %d extra; want the checkouts' %d and their edits' %d", rep.Total.Sent, rep.ExtraRequests, co.Sent, ct.Sent)
	}
	// The achieved rate is the scheduled checkouts', as the target is.
	if rep.AchievedRate > 55 {
		t.Errorf("achieved %.1f/s for a target of 50/s: the edits before the checkouts were counted in it", rep.AchievedRate)
	}
}
