package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/shardmart/shardmart/internal/loadgen"
	"github.com/shardmart/shardmart/internal/tracing"
)

// errTracingOff is a server that keeps no traces (started without --trace-sample-ratio).
var errTracingOff = errors.New("the server keeps no traces: start it with --trace-sample-ratio above 0 (bench's own server: pass --trace-sample-ratio)")

// fetchTraces reads each server's recent sampled spans (GET /v1/admin/traces, admin token).
func fetchTraces(ctx context.Context, client *http.Client, bases []string, adminToken string) ([]tracing.Span, error) {
	var all []tracing.Span
	for _, base := range bases {
		req, err := http.NewRequestWithContext(ctx, "GET", base+"/v1/admin/traces", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("X-Admin-Token", adminToken)
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("fetch traces from %s: %w", base, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			return nil, fmt.Errorf("fetch traces from %s: %w", base, err)
		case resp.StatusCode == http.StatusNotFound:
			return nil, errTracingOff
		case resp.StatusCode != http.StatusOK:
			return nil, fmt.Errorf("fetch traces from %s: %d %s", base, resp.StatusCode, b)
		}
		var doc struct {
			Spans []tracing.Span `json:"spans"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("fetch traces from %s: %w", base, err)
		}
		all = append(all, doc.Spans...)
	}
	return all, nil
}

// breakdown summarizes the requests traced from since (the recorded window: warm-up and the
// workload's preparation are left out).
func breakdown(ctx context.Context, client *http.Client, bases []string, adminToken string, since time.Time) ([]tracing.Breakdown, error) {
	spans, err := fetchTraces(ctx, client, bases, adminToken)
	if err != nil {
		return nil, err
	}
	return tracing.Summarize(spans, func(root tracing.Span) bool { return !root.Start.Before(since) }), nil
}

// stepTraces reads the server's breakdown after each run, by rate. A server without traces,
// an unreachable one or a missing admin token is said once on log, and the runs go on without
// a breakdown.
type stepTraces struct {
	log    io.Writer
	client *http.Client
	bases  []string
	admin  string
	byRate map[float64][]tracing.Breakdown
	off    bool
}

// read summarizes the requests traced since the run's recorded window began. The window is
// this process's clock against the server's span times: with --url the two machines' clocks
// must agree (NTP) or warm-up requests leak in or recorded ones drop out.
func (s *stepTraces) read(ctx context.Context, rate float64, since time.Time) {
	if s.off {
		return
	}
	if s.admin == "" {
		fmt.Fprintln(s.log, "no breakdown: the server's traces need its --admin-token")
		s.off = true
		return
	}
	bs, err := breakdown(ctx, s.client, s.bases, s.admin, since)
	if err != nil {
		fmt.Fprintf(s.log, "no breakdown: %v\n", err)
		s.off = true
		return
	}
	if s.byRate == nil {
		s.byRate = map[float64][]tracing.Breakdown{}
	}
	s.byRate[rate] = bs
}

// shownStep is the find-max step whose table bench prints: the best passing one, or the
// first when even that failed (it shows why); none when no step ran (a start above the limit).
func shownStep(steps []loadgen.Step, best float64) (loadgen.Step, bool) {
	for _, st := range steps {
		if st.Rate == best {
			return st, true
		}
	}
	if len(steps) == 0 {
		return loadgen.Step{}, false
	}
	return steps[0], true
}

// writeBreakdown prints the breakdown under a heading saying which run it is from.
func writeBreakdown(w io.Writer, bs []tracing.Breakdown, run string) error {
	if len(bs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nwhere the time went (server-side, sampled traces of %s; mean per request):\n", run)
	return tracing.Write(w, bs)
}
