// Package loadgen is the `bench` command's open-loop HTTP load generator: requests arrive at a
// constant rate whatever the server does, each one's latency is measured from the moment it
// was due (so queueing in the client or the server is never hidden: no coordinated omission),
// and a client that cannot keep the rate says so instead of silently slowing down.
package loadgen

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Outcome classifies a completed request.
type Outcome int

const (
	// OK is a success.
	OK Outcome = iota
	// Expected is a refusal the workload provokes on purpose and the server must give (a
	// checkout of sold-out stock: 409): neither a success nor an error.
	Expected
	// Failed is an error: a transport failure, a timeout or an answer the workload does not
	// accept.
	Failed
)

// Op is one request of the workload: Kind names it in the report, Do performs it and
// returns its outcome (and, when Failed, why).
type Op struct {
	Kind string
	// User is who sends it (the workload's user, "" when none is named).
	User string
	Do   func(ctx context.Context) (Outcome, string)
	// Dropped, when set, is called instead of Do when the request is not sent (the in-flight
	// limit), so what the op holds (its user) is given back.
	Dropped func()
	// NotSent, when not empty, says why the workload could not send this request (every user
	// busy): it counts as dropped, as a request past the in-flight limit does.
	NotSent string
	// Prior, when set, is where Do notes a request of another kind it had to send before its
	// own (a checkout of an empty cart adds an item first). That request is recorded under its
	// own kind, timed from the op's due time, and the op's own latency counts from its end:
	// each type's percentiles are its own requests', as a shop's per-request SLOs are.
	Prior *Prior
}

// Prior is the request an op sent before its own, as Do noted it.
type Prior struct {
	Kind    string
	Outcome Outcome
	Why     string
	// End is when its answer came; zero when Do sent none.
	End time.Time
}

// Schedule is an open-loop run: Rate requests per second, due at fixed intervals from the
// start, for Warmup (run, not recorded) then Duration (recorded).
type Schedule struct {
	Rate     float64
	Warmup   time.Duration
	Duration time.Duration
	// MaxInFlight bounds concurrent requests; a request due while that many are in flight is
	// not sent and counts as dropped (an error), so an overloaded client cannot hide load.
	MaxInFlight int
	// CPU lists processes whose CPU time over the recorded window is reported per request
	// answered (the server, databases on the same host).
	CPU []Process
	// Profile, when set, is called as the recorded window begins; the function it returns is
	// called when the window's last request has been answered (a CPU profile of the window).
	Profile func() (stop func())
}

func (s Schedule) validate() error {
	switch {
	case s.Rate <= 0 || math.IsInf(s.Rate, 0) || math.IsNaN(s.Rate):
		return fmt.Errorf("rate must be positive, got %v", s.Rate)
	case s.Duration <= 0:
		return fmt.Errorf("duration must be positive, got %s", s.Duration)
	case s.Warmup < 0:
		return fmt.Errorf("warmup must not be negative, got %s", s.Warmup)
	case s.MaxInFlight < 1:
		return fmt.Errorf("max in flight must be at least 1, got %d", s.MaxInFlight)
	}
	return nil
}

// Latencies are recorded in microseconds from 1 µs to 10 min with 3 significant digits.
const (
	histMin, histMax = 1, int64(10 * time.Minute / time.Microsecond)
	histDigits       = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// kindRec is what one request kind recorded.
type kindRec struct {
	hist                                *hdrhistogram.Histogram
	sent, ok, expected, failed, dropped int64
	firstError                          string
}

type recorder struct {
	mu        sync.Mutex
	kinds     map[string]*kindRec
	order     []string
	lastDone  time.Time
	maxLag    time.Duration
	scheduled int64
	// extras are the requests ops sent before their own; extraGood those answered OK or
	// Expected.
	extras, extraGood int64
}

func (r *recorder) kind(k string) *kindRec {
	kr := r.kinds[k]
	if kr == nil {
		kr = &kindRec{hist: newHist()}
		r.kinds[k] = kr
		r.order = append(r.order, k)
	}
	return kr
}

func (r *recorder) dropped(k, why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scheduled++
	kr := r.kind(k)
	kr.dropped++
	if kr.firstError == "" {
		kr.firstError = "dropped: " + why
	}
}

func (r *recorder) sent(k string, lag time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.scheduled++
	r.kind(k).sent++
	r.maxLag = max(r.maxLag, lag)
}

// extra counts a request an op sent besides the one it was scheduled for (Op.Prior).
func (r *recorder) extra(k string, o Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kind(k).sent++
	r.extras++
	if o != Failed {
		r.extraGood++
	}
}

func (r *recorder) done(k string, o Outcome, why string, latency time.Duration, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kr := r.kind(k)
	switch o {
	case OK:
		kr.ok++
	case Expected:
		kr.expected++
	default:
		kr.failed++
		if kr.firstError == "" {
			kr.firstError = why
		}
	}
	// Failed requests are recorded too: a timeout that took 10 s is 10 s of someone's wait.
	_ = kr.hist.RecordValue(max(histMin, min(histMax, latency.Microseconds())))
	if at.After(r.lastDone) {
		r.lastDone = at
	}
}

// Run drives next's requests on s's schedule and reports the recorded window. next is called
// once per due request, in order, from one goroutine, so a seeded generator behind it gives
// the same sequence every run.
func Run(ctx context.Context, s Schedule, next func(seq int) Op) (Report, error) {
	if err := s.validate(); err != nil {
		return Report{}, err
	}
	rec := &recorder{kinds: map[string]*kindRec{}}
	slots := make(chan struct{}, s.MaxInFlight)
	var wg sync.WaitGroup
	interval := float64(time.Second) / s.Rate
	start := time.Now()
	measureFrom := start.Add(s.Warmup)
	end := measureFrom.Add(s.Duration)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	// Warm-up requests run but go to a recorder nobody reads.
	warm := &recorder{kinds: map[string]*kindRec{}}
	meter := &cpuMeter{procs: s.CPU}
	stopProfile := func() {}
dispatch:
	for seq := 0; ; seq++ {
		due := start.Add(time.Duration(float64(seq) * interval))
		if !due.Before(end) {
			break
		}
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				break dispatch
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			break
		}
		if meter.start == nil && !due.Before(measureFrom) {
			meter.begin()
			if s.Profile != nil {
				stopProfile = s.Profile()
			}
		}
		op := next(seq)
		r := rec
		if due.Before(measureFrom) {
			r = warm
		}
		if op.NotSent != "" {
			r.dropped(op.Kind, op.NotSent)
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			if op.Dropped != nil {
				op.Dropped()
			}
			r.dropped(op.Kind, "max in-flight requests reached")
			continue
		}
		// When the dispatcher runs late (a starved CPU), due stays the reference: the lag is
		// part of every latency it delays, and its maximum is reported.
		r.sent(op.Kind, time.Since(due))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			o, why := op.Do(ctx)
			now := time.Now()
			from := due
			if p := op.Prior; p != nil && !p.End.IsZero() {
				r.extra(p.Kind, p.Outcome)
				r.done(p.Kind, p.Outcome, p.Why, p.End.Sub(due), p.End)
				from = p.End
			}
			r.done(op.Kind, o, why, now.Sub(from), now)
		}()
	}
	wg.Wait()
	stopProfile()
	rep := rec.report(s, measureFrom)
	rep.CPU = meter.end(rep.Total.OK + rep.Total.Expected + rep.Total.Failed)
	return rep, ctx.Err()
}
