package loadgen_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/loadgen"
)

// getOp returns a next function whose every request is a GET of url.
func getOp(client *http.Client, url string) func(int) loadgen.Op {
	return func(int) loadgen.Op {
		return loadgen.Op{Kind: "get", Do: func(ctx context.Context) (loadgen.Outcome, string) {
			req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
			resp, err := client.Do(req)
			if err != nil {
				return loadgen.Failed, err.Error()
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return loadgen.Failed, resp.Status
			}
			return loadgen.OK, ""
		}}
	}
}

// serialServer answers one request at a time, each after service: at most 1/service per second.
func serialServer(t *testing.T, service time.Duration) *httptest.Server {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		time.Sleep(service)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestLatencyRunsFromTheDueTime: a server that can do 50/s gets 100/s for 1 s. Every request
// is still sent on time (open loop), so the k-th answer comes after k services and its latency,
// counted from when it was due, includes the queue: a closed-loop client would report about
// one service time (20 ms) instead. The client says it fell behind.
func TestLatencyRunsFromTheDueTime(t *testing.T) {
	srv := serialServer(t, 20*time.Millisecond)
	rep, err := loadgen.Run(context.Background(), loadgen.Schedule{Rate: 100, Duration: time.Second, MaxInFlight: 1000},
		getOp(srv.Client(), srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	tot := rep.Total
	if tot.Scheduled != 100 || tot.Sent != 100 || tot.OK != 100 || tot.Dropped != 0 {
		t.Fatalf("want 100 scheduled, sent and answered, none dropped: %+v", tot)
	}
	// Request k (due at k*10 ms) is answered no earlier than (k+1)*20 ms: latency >= k*10 ms.
	// So the median is at least ~0.5 s and the p99 at least ~0.99 s.
	if tot.P50 < 400 || tot.P99 < 900 {
		t.Errorf("latency should include the queue: p50 %.1f ms, p99 %.1f ms", tot.P50, tot.P99)
	}
	// 100 services of 20 ms take at least 2 s: at most 50/s achieved.
	if rep.AchievedRate > 51 || !rep.Behind {
		t.Errorf("achieved %.1f/s of 100/s, behind %v: want <= 50/s and behind", rep.AchievedRate, rep.Behind)
	}
}

// TestOverflowIsCountedAsDropped: with 2 requests allowed in flight, the requests due while
// both are taken are not sent, and count as errors instead of vanishing.
func TestOverflowIsCountedAsDropped(t *testing.T) {
	srv := serialServer(t, 20*time.Millisecond)
	rep, err := loadgen.Run(context.Background(), loadgen.Schedule{Rate: 100, Duration: time.Second, MaxInFlight: 2},
		getOp(srv.Client(), srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	tot := rep.Total
	if tot.Scheduled != 100 || tot.Sent+tot.Dropped != 100 || tot.Dropped == 0 {
		t.Fatalf("want 100 scheduled = sent + dropped, some dropped: %+v", tot)
	}
	if tot.ErrorRate < float64(tot.Dropped)/100-1e-9 || !rep.Behind {
		t.Errorf("dropped requests must count as errors and mark the client behind: %+v behind %v", tot, rep.Behind)
	}
	if tot.FirstError == "" {
		t.Error("the first error should say why")
	}
}

// TestWarmupIsNotRecorded: requests due in the warm-up run but are not in the report.
func TestWarmupIsNotRecorded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	var sent sync.WaitGroup
	n := 0
	var mu sync.Mutex
	next := func(seq int) loadgen.Op {
		op := getOp(srv.Client(), srv.URL)(seq)
		do := op.Do
		sent.Add(1)
		op.Do = func(ctx context.Context) (loadgen.Outcome, string) {
			defer sent.Done()
			mu.Lock()
			n++
			mu.Unlock()
			return do(ctx)
		}
		return op
	}
	rep, err := loadgen.Run(context.Background(), loadgen.Schedule{Rate: 100, Warmup: 300 * time.Millisecond,
		Duration: 500 * time.Millisecond, MaxInFlight: 100}, next)
	if err != nil {
		t.Fatal(err)
	}
	sent.Wait()
	if n != 80 || rep.Total.Scheduled != 50 {
		t.Errorf("want 80 requests sent and the last 50 recorded, got %d sent and %d recorded", n, rep.Total.Scheduled)
	}
}

// TestScheduleValidation refuses schedules that cannot run.
func TestScheduleValidation(t *testing.T) {
	for _, s := range []loadgen.Schedule{{Rate: 0, Duration: time.Second, MaxInFlight: 1},
		{Rate: 1, Duration: 0, MaxInFlight: 1}, {Rate: 1, Duration: time.Second}, {Rate: 1, Duration: time.Second, MaxInFlight: 1, Warmup: -1}} {
		if _, err := loadgen.Run(context.Background(), s, nil); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
}

// TestProfileCoversTheRecordedWindow: the profile hook starts once, when the first recorded
// request is due (after the warm-up's 30 were sent), and stops after every answer is in.
func TestProfileCoversTheRecordedWindow(t *testing.T) {
	var mu sync.Mutex
	var started, stopped bool
	var beforeStart, beforeStop int
	answered := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	get := getOp(srv.Client(), srv.URL)
	next := func(seq int) loadgen.Op {
		op := get(seq)
		do := op.Do
		op.Do = func(ctx context.Context) (loadgen.Outcome, string) {
			o, why := do(ctx)
			mu.Lock()
			answered++
			mu.Unlock()
			return o, why
		}
		return op
	}
	rep, err := loadgen.Run(context.Background(), loadgen.Schedule{Rate: 100, Warmup: 300 * time.Millisecond,
		Duration: 500 * time.Millisecond, MaxInFlight: 100, Profile: func() func() {
			mu.Lock()
			defer mu.Unlock()
			if started {
				t.Error("profile started twice")
			}
			started, beforeStart = true, answered
			return func() {
				mu.Lock()
				defer mu.Unlock()
				stopped, beforeStop = true, answered
			}
		}}, next)
	if err != nil {
		t.Fatal(err)
	}
	if !started || !stopped {
		t.Fatalf("profile started %v, stopped %v: want both", started, stopped)
	}
	if beforeStart > 30 {
		t.Errorf("%d answers before the profile started: want the 30 warm-up requests at most", beforeStart)
	}
	if beforeStop != answered || rep.Total.OK != 50 {
		t.Errorf("profile stopped after %d of %d answers, %d recorded: want every answer, 50 recorded", beforeStop, answered, rep.Total.OK)
	}
}
