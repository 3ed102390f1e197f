package loadgen

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// FindMax searches for the highest rate the target sustains within the SLO: it runs the
// schedule at Start, multiplies the rate by Factor while a step passes, then bisects Refine
// times between the last passing and the first failing rate.
type FindMax struct {
	Start, Factor float64
	// Limit stops the climb (a step above it is not tried); 0: no limit.
	Limit  float64
	Refine int
	// MaxP99 bounds the p99 of every request type, except those TypeP99 bounds on their own
	// (login: a bcrypt comparison by design), as a shop's SLOs are written; with Total it
	// bounds the total's p99 instead, and TypeP99 is ignored. MaxErrorRate bounds the total's
	// errors. A step whose client fell behind fails too, since its figures are not of the
	// rate asked for.
	MaxP99       time.Duration
	TypeP99      map[string]time.Duration
	Total        bool
	MaxErrorRate float64
}

// Step is one rate tried.
type Step struct {
	Rate float64 `json:"rate"`
	Pass bool    `json:"pass"`
	Why  string  `json:"why,omitempty"`
	// FailedType names the request type whose p99 failed the step, the first in the report's
	// order when several did (Why names them all); "total" under the total rule; empty when
	// the step passed or failed on errors or the rate.
	FailedType string `json:"failed_type,omitempty"`
	Report     Report `json:"report"`
}

// Verdict judges a report against f's SLO: "" when it passes, else why not.
func (f FindMax) Verdict(r Report) string {
	why, _ := f.judge(r)
	return why
}

// judge is Verdict with the request type whose p99 failed the step.
func (f FindMax) judge(r Report) (why, failedType string) {
	if r.Total.ErrorRate >= f.MaxErrorRate {
		return fmt.Sprintf("error rate %.2f%% ≥ %.2f%%", 100*r.Total.ErrorRate, 100*f.MaxErrorRate), ""
	}
	if f.Total {
		if r.Total.P99 >= ms(f.MaxP99) {
			return fmt.Sprintf("total p99 %.2f ms ≥ %.2f ms", r.Total.P99, ms(f.MaxP99)), "total"
		}
	} else {
		var over []string
		for _, t := range r.Types {
			bound, own := f.TypeP99[t.Type]
			if !own {
				bound = f.MaxP99
			}
			if t.P99 >= ms(bound) {
				over = append(over, fmt.Sprintf("%s p99 %.2f ms ≥ %.2f ms", t.Type, t.P99, ms(bound)))
				if failedType == "" {
					failedType = t.Type
				}
			}
		}
		if len(over) > 0 {
			return strings.Join(over, "; "), failedType
		}
	}
	if r.Behind {
		return fmt.Sprintf("behind: achieved %.0f/s of %.0f/s", r.AchievedRate, r.TargetRate), ""
	}
	return "", ""
}

// Run searches; run performs one step at a rate, and each finished step is passed to
// progress. It returns the highest passing rate (0 when even Start fails) and every step.
func (f FindMax) Run(ctx context.Context, run func(ctx context.Context, rate float64) (Report, error), progress func(Step)) (float64, []Step, error) {
	s, err := f.Begin()
	if err != nil {
		return 0, nil, err
	}
	for rate, ok := s.Next(); ok; rate, ok = s.Next() {
		rep, err := run(ctx, rate)
		if err != nil {
			return s.Best(), s.Steps(), fmt.Errorf("find-max at %.0f/s: %w", rate, err)
		}
		st := s.Record(rep)
		if progress != nil {
			progress(st)
		}
	}
	return s.Best(), s.Steps(), nil
}

// MaxSearch is a find-max in progress, taken one step at a time so that several searches (one
// per placement or workload) can run their steps in turn, alternating, in one run.
type MaxSearch struct {
	f         FindMax
	steps     []Step
	next      float64
	best      float64 // highest passing rate so far (the bisection's lower end)
	failed    float64 // lowest failing rate so far, once one failed (the upper end)
	refined   int
	bisecting bool
	done      bool
}

// Begin starts a search at f.Start.
func (f FindMax) Begin() (*MaxSearch, error) {
	if f.Start <= 0 || f.Factor <= 1 {
		return nil, fmt.Errorf("find-max needs a start rate > 0 and a factor > 1, got %v and %v", f.Start, f.Factor)
	}
	s := &MaxSearch{f: f, next: f.Start}
	s.done = f.Limit > 0 && f.Start > f.Limit
	return s, nil
}

// Next is the rate of the next step; false when the search is over.
func (s *MaxSearch) Next() (float64, bool) { return s.next, !s.done }

// Record judges the report of the step at Next's rate and moves the search on.
func (s *MaxSearch) Record(rep Report) Step {
	st := Step{Rate: s.next, Report: rep}
	st.Why, st.FailedType = s.f.judge(rep)
	st.Pass = st.Why == ""
	s.steps = append(s.steps, st)
	switch {
	case !s.bisecting && st.Pass:
		s.best = st.Rate
		s.next = st.Rate * s.f.Factor
		s.done = s.f.Limit > 0 && s.next > s.f.Limit
		return st
	case !s.bisecting:
		s.failed, s.bisecting = st.Rate, true
		s.done = s.best == 0
	case st.Pass:
		s.best = st.Rate
		s.refined++
	default:
		s.failed = st.Rate
		s.refined++
	}
	if s.refined >= s.f.Refine {
		s.done = true
	}
	s.next = (s.best + s.failed) / 2
	return st
}

// Best is the highest rate that passed (0: none yet).
func (s *MaxSearch) Best() float64 { return s.best }

// Steps are the steps taken, in order.
func (s *MaxSearch) Steps() []Step { return s.steps }
