package loadgen

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// Stats are one request kind's (or all kinds') figures over the recorded window. Latencies
// are milliseconds from each request's due time.
type Stats struct {
	Type string `json:"type"`
	// Scheduled = Sent + Dropped; Completed = OK + Expected + Failed (Sent less those cut off
	// by cancellation).
	Scheduled int64   `json:"scheduled"`
	Sent      int64   `json:"sent"`
	Dropped   int64   `json:"dropped"`
	OK        int64   `json:"ok"`
	Expected  int64   `json:"expected"`
	Failed    int64   `json:"failed"`
	ErrorRate float64 `json:"error_rate"` // (Failed + Dropped) / Scheduled
	Rate      float64 `json:"rate"`       // (OK + Expected) per second of the window
	P50       float64 `json:"p50_ms"`
	P95       float64 `json:"p95_ms"`
	P99       float64 `json:"p99_ms"`
	P999      float64 `json:"p99_9_ms"`
	Max       float64 `json:"max_ms"`
	// FirstError says why the first failed request failed.
	FirstError string `json:"first_error,omitempty"`
}

// Report is one run.
type Report struct {
	Scenario   string  `json:"scenario,omitempty"`
	TargetRate float64 `json:"target_rate"`
	// AchievedRate is good answers (OK + Expected) to the scheduled requests per second of the
	// window, the window being Duration or, when answers came late, until the last answer.
	// Requests an op sent before its own (Op.Prior) are in their type's row and the total,
	// not here: this is the rate the target asked for.
	AchievedRate float64 `json:"achieved_rate"`
	// ExtraRequests is how many requests ops sent before their own (a checkout's cart edit).
	ExtraRequests int64   `json:"extra_requests,omitempty"`
	DurationS     float64 `json:"duration_s"`
	WarmupS       float64 `json:"warmup_s"`
	ElapsedS      float64 `json:"elapsed_s"`
	MaxInFlight   int     `json:"max_in_flight"`
	// MaxDispatchLagMS is how late the client sent its latest request (its own CPU starved).
	MaxDispatchLagMS float64 `json:"max_dispatch_lag_ms"`
	// Behind is true when the client did not deliver the target rate: dropped requests, or
	// good answers below 90 % of it (the window includes the last answers' latency).
	Behind bool    `json:"behind"`
	Total  Stats   `json:"total"`
	Types  []Stats `json:"types"`
	// CPU is each accounted process's CPU over the window, per request answered in it.
	CPU []CPUUse `json:"cpu,omitempty"`
	// Flash is the flash-sale's stock check (nil in other scenarios).
	Flash *FlashCheck `json:"flash_sale,omitempty"`
}

func (r *recorder) report(s Schedule, measureFrom time.Time) Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	elapsed := s.Duration
	if d := r.lastDone.Sub(measureFrom); d > elapsed {
		elapsed = d
	}
	rep := Report{TargetRate: s.Rate, DurationS: s.Duration.Seconds(), WarmupS: s.Warmup.Seconds(),
		ElapsedS: elapsed.Seconds(), MaxInFlight: s.MaxInFlight, MaxDispatchLagMS: ms(r.maxLag)}
	total := &kindRec{hist: newHist()}
	slices.SortStableFunc(r.order, func(a, b string) int { return cmp.Compare(kindRank(a), kindRank(b)) })
	for _, k := range r.order {
		kr := r.kinds[k]
		rep.Types = append(rep.Types, kr.stats(k, elapsed))
		total.hist.Merge(kr.hist)
		total.sent += kr.sent
		total.ok += kr.ok
		total.expected += kr.expected
		total.failed += kr.failed
		total.dropped += kr.dropped
		if total.firstError == "" {
			total.firstError = kr.firstError
		}
	}
	rep.Total = total.stats("total", elapsed)
	rep.AchievedRate = float64(total.ok+total.expected-r.extraGood) / elapsed.Seconds()
	rep.ExtraRequests = r.extras
	rep.Behind = rep.Total.Dropped > 0 || rep.AchievedRate < 0.9*s.Rate
	return rep
}

func (kr *kindRec) stats(kind string, elapsed time.Duration) Stats {
	st := Stats{Type: kind, Scheduled: kr.sent + kr.dropped, Sent: kr.sent, Dropped: kr.dropped, OK: kr.ok,
		Expected: kr.expected, Failed: kr.failed, FirstError: kr.firstError}
	if st.Scheduled > 0 {
		st.ErrorRate = float64(kr.failed+kr.dropped) / float64(st.Scheduled)
	}
	st.Rate = float64(kr.ok+kr.expected) / elapsed.Seconds()
	q := func(p float64) float64 { return usToMS(kr.hist.ValueAtQuantile(p)) }
	st.P50, st.P95, st.P99, st.P999 = q(50), q(95), q(99), q(99.9)
	st.Max = usToMS(kr.hist.Max())
	return st
}

func usToMS(us int64) float64 { return float64(us) / 1000 }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// WriteText prints the report as a table, one row per request kind and the total.
func (rep Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "target %.0f/s, achieved %.0f/s over %.1fs (warm-up %.1fs not counted), max in flight %d\n",
		rep.TargetRate, rep.AchievedRate, rep.ElapsedS, rep.WarmupS, rep.MaxInFlight)
	if rep.ExtraRequests > 0 {
		fmt.Fprintf(w, "%d more requests were sent before a scheduled one (a checkout's cart edit): in their type's row and the total\n", rep.ExtraRequests)
	}
	if rep.Behind {
		fmt.Fprintf(w, "BEHIND: the target rate was not delivered (%d dropped at the in-flight limit, achieved %.0f%% of target, dispatcher up to %.1f ms late)\n",
			rep.Total.Dropped, 100*rep.AchievedRate/rep.TargetRate, rep.MaxDispatchLagMS)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "type\tscheduled\tok\texpected\tfailed\tdropped\terror%\trate/s\tp50 ms\tp95 ms\tp99 ms\tp99.9 ms\tmax ms\t")
	row := func(s Stats) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", s.Type, s.Scheduled, s.OK,
			s.Expected, s.Failed, s.Dropped, 100*s.ErrorRate, s.Rate, s.P50, s.P95, s.P99, s.P999, s.Max)
	}
	for _, s := range rep.Types {
		row(s)
	}
	row(rep.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range rep.Types {
		if s.FirstError != "" {
			fmt.Fprintf(w, "first error of %s: %s\n", s.Type, s.FirstError)
		}
	}
	for _, c := range rep.CPU {
		if c.Error != "" {
			fmt.Fprintf(w, "CPU of %s (pid %d): not measured: %s\n", c.Name, c.PID, c.Error)
			continue
		}
		fmt.Fprintf(w, "CPU of %s (pid %d): %.2f s, %.3f ms per request answered\n", c.Name, c.PID, c.Seconds, c.PerRequestMS)
	}
	if f := rep.Flash; f != nil {
		fmt.Fprintf(w, "flash sale: %d products, %d units in stock at the start, %d sold in %d orders, %d left (read through the API); oversold: %v\n",
			len(f.Products), f.StockBefore, f.UnitsSold, f.Orders, f.StockAfter, f.Oversold)
	}
	return nil
}

// kindRank orders the table as the mix is written; other kinds follow in order of appearance.
func kindRank(k string) int {
	if i := slices.IndexFunc(DefaultMix, func(w Weight) bool { return w.Kind == k }); i >= 0 {
		return i
	}
	return len(DefaultMix)
}
