package repair

import (
	"context"
	"fmt"
	"time"
)

// Pause stops a running run from starting new segments (those running finish); the repairer
// keeps the lease and waits for Resume or Abort.
func (st *Store) Pause(ctx context.Context, id string) error {
	return st.transition(ctx, id, RunPaused, time.Time{}, RunRunning)
}

// Resume lets a paused run go on.
func (st *Store) Resume(ctx context.Context, id string) error {
	return st.transition(ctx, id, RunRunning, time.Time{}, RunPaused)
}

// Abort ends a running or paused run for good: the repairer kills its nodetool processes and
// stops; the next repair starts a new run.
func (st *Store) Abort(ctx context.Context, id string) error {
	return st.transition(ctx, id, RunAborted, time.Now(), RunRunning, RunPaused)
}

func (st *Store) transition(ctx context.Context, id, to string, finished time.Time, from ...string) error {
	if _, err := st.Run(ctx, id); err != nil {
		return err
	}
	applied, found, err := st.SetRunState(ctx, id, to, finished, from...)
	if err != nil {
		return err
	}
	if !applied {
		return fmt.Errorf("repair run %s is %s: only a run that is %v can be made %s", id, found, from, to)
	}
	return nil
}

// Progress counts a run's segments by state.
type Progress struct {
	Run      RunInfo
	ByState  map[string]int
	Attempts int           // over every segment
	Repair   time.Duration // sum of the last attempts' durations
}

// Status is the progress of the newest runs (at most limit).
func (st *Store) Status(ctx context.Context, limit int) ([]Progress, error) {
	runs, err := st.Runs(ctx)
	if err != nil {
		return nil, err
	}
	if len(runs) > limit {
		runs = runs[:limit]
	}
	out := make([]Progress, 0, len(runs))
	for _, r := range runs {
		segs, err := st.Segments(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		p := Progress{Run: r, ByState: map[string]int{}}
		for _, s := range segs {
			p.ByState[s.State]++
			p.Attempts += s.Attempts
			p.Repair += s.Duration
		}
		out = append(out, p)
	}
	return out, nil
}
