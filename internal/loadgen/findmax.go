package loadgen

import (
	"context"
	"fmt"
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
	// FailedType names the request type whose p99 failed the step ("total" under the total
	// rule; empty when the step passed or failed on errors or the rate).
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
		for _, t := range r.Types {
			bound, own := f.TypeP99[t.Type]
			if !own {
				bound = f.MaxP99
			}
			if t.P99 >= ms(bound) {
				return fmt.Sprintf("%s p99 %.2f ms ≥ %.2f ms", t.Type, t.P99, ms(bound)), t.Type
			}
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
	if f.Start <= 0 || f.Factor <= 1 {
		return 0, nil, fmt.Errorf("find-max needs a start rate > 0 and a factor > 1, got %v and %v", f.Start, f.Factor)
	}
	var steps []Step
	try := func(rate float64) (bool, error) {
		rep, err := run(ctx, rate)
		if err != nil {
			return false, fmt.Errorf("find-max at %.0f/s: %w", rate, err)
		}
		st := Step{Rate: rate, Report: rep}
		st.Why, st.FailedType = f.judge(rep)
		st.Pass = st.Why == ""
		steps = append(steps, st)
		if progress != nil {
			progress(st)
		}
		return st.Pass, nil
	}
	best, failed := 0.0, 0.0
	for rate := f.Start; f.Limit <= 0 || rate <= f.Limit; rate *= f.Factor {
		ok, err := try(rate)
		if err != nil {
			return best, steps, err
		}
		if !ok {
			failed = rate
			break
		}
		best = rate
	}
	if failed == 0 || best == 0 {
		return best, steps, nil
	}
	lo, hi := best, failed
	for range f.Refine {
		mid := (lo + hi) / 2
		ok, err := try(mid)
		if err != nil {
			return lo, steps, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, steps, nil
}
