package repair

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// outcome is one segment attempt's end, as a worker reports it.
type outcome struct {
	seg  SegmentState
	took time.Duration
	err  error
}

// execute repairs the run's segments that are not done: segments whose replica sets are
// disjoint from those of running (or resting) segments start, up to Parallelism at once.
// A segment found "running" was left by a dead repairer and is simply tried again.
func (r *Repairer) execute(ctx context.Context, run RunInfo, segs []SegmentState, res *Result, log *slog.Logger) error {
	sc := newSchedule(segs, res)
	r.o.Metrics.setProgress(r.o.Keyspace, res.Done, len(segs))
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	state, checked := run.State, time.Time{}
	tick := time.NewTicker(min(r.o.Poll, time.Second))
	defer tick.Stop()
	for len(sc.pending) > 0 || sc.running > 0 {
		if time.Since(checked) >= r.o.Poll || sc.running == 0 && state == RunPaused {
			state = r.runState(ctx, run.ID, state, log)
			checked = time.Now()
		}
		if state == RunAborted {
			cancel() // kills the running nodetool processes
			sc.drain()
			return fmt.Errorf("run %s: %w", run.ID, ErrAborted)
		}
		if state == RunRunning {
			r.startFree(wctx, &wg, sc, run, log)
		}
		select {
		case <-ctx.Done():
			cancel()
			sc.drain()
			return ctx.Err()
		case <-tick.C:
		case o := <-sc.results:
			r.finished(ctx, sc, o, res, len(segs), log)
		}
	}
	return nil
}

// schedule is execute's bookkeeping: the segments still to repair, what each node is doing,
// and the attempts under way.
type schedule struct {
	pending   []*SegmentState
	busyUntil map[string]time.Time // node -> free again (after the intensity pause)
	busy      map[string]bool      // node -> a segment runs on it
	notBefore map[int]time.Time    // segment -> retry backoff
	running   int
	results   chan outcome
}

// newSchedule counts the done and failed segments into res and queues the others.
func newSchedule(segs []SegmentState, res *Result) *schedule {
	sc := &schedule{busyUntil: map[string]time.Time{}, busy: map[string]bool{}, notBefore: map[int]time.Time{},
		results: make(chan outcome)}
	for i := range segs {
		switch segs[i].State {
		case SegDone:
			res.Done++
		case SegFailed:
			res.Failed++
		default:
			sc.pending = append(sc.pending, &segs[i])
		}
	}
	return sc
}

// drain waits for the attempts under way to report.
func (sc *schedule) drain() {
	for sc.running > 0 {
		<-sc.results
		sc.running--
	}
}

// runState reads the run's state from the store (pause, resume, abort), keeping state when the
// read fails.
func (r *Repairer) runState(ctx context.Context, id, state string, log *slog.Logger) string {
	cur, err := r.store.Run(ctx, id)
	if err != nil {
		log.Warn("repair run state not read; going on", "err", err)
		return state
	}
	if cur.State != state {
		log.Info("repair run state changed", "from", state, "to", cur.State)
	}
	return cur.State
}

// startFree starts the pending segments whose replicas are free and whose backoff is over, up
// to Parallelism attempts at once.
func (r *Repairer) startFree(ctx context.Context, wg *sync.WaitGroup, sc *schedule, run RunInfo, log *slog.Logger) {
	now := time.Now()
	for i := 0; i < len(sc.pending) && sc.running < r.o.Parallelism; i++ {
		sg := sc.pending[i]
		if now.Before(sc.notBefore[sg.ID]) || !r.free(sg.Replicas, sc.busy, sc.busyUntil, now) {
			continue
		}
		sc.pending = append(sc.pending[:i], sc.pending[i+1:]...)
		i--
		for _, n := range sg.Replicas {
			sc.busy[n] = true
		}
		sc.running++
		wg.Add(1)
		go func(sg SegmentState) {
			defer wg.Done()
			sc.results <- r.attempt(ctx, run, sg, log)
		}(*sg)
	}
}

// finished takes an attempt's outcome: its replicas rest, and the segment is done, failed for
// good, or queued again after a backoff.
func (r *Repairer) finished(ctx context.Context, sc *schedule, o outcome, res *Result, total int, log *slog.Logger) {
	sc.running--
	sg := o.seg
	for _, n := range sg.Replicas {
		sc.busy[n] = false
		// Intensity: the replicas rest t*(1-i)/i before their next segment.
		rest := time.Duration(float64(o.took) * (1 - r.o.Intensity) / r.o.Intensity)
		sc.busyUntil[n] = time.Now().Add(rest)
	}
	switch {
	case o.err == nil:
		res.Done++
		res.Repaired++
		r.o.Metrics.segment(r.o.Keyspace, true)
		r.o.Metrics.setProgress(r.o.Keyspace, res.Done, total)
	case ctx.Err() != nil:
	default:
		r.o.Metrics.segment(r.o.Keyspace, false)
		if sg.State == SegFailed {
			res.Failed++
			log.Error("repair segment failed every attempt", "segment", sg.ID, "attempts", sg.Attempts, "err", o.err)
			return
		}
		wait := r.backoff(sg.Attempts)
		sc.notBefore[sg.ID] = time.Now().Add(wait)
		log.Warn("repair segment failed; retrying", "segment", sg.ID, "attempt", sg.Attempts, "retry_in", wait, "err", o.err)
		sc.pending = append(sc.pending, &sg)
	}
}

func (r *Repairer) free(replicas []string, busy map[string]bool, busyUntil map[string]time.Time, now time.Time) bool {
	for _, n := range replicas {
		if busy[n] || now.Before(busyUntil[n]) {
			return false
		}
	}
	return true
}

// backoff is the wait before attempt n+1: Backoff doubled per failed attempt, at most 10 min.
func (r *Repairer) backoff(attempts int) time.Duration {
	d := r.o.Backoff
	for i := 1; i < attempts && d < 10*time.Minute; i++ {
		d *= 2
	}
	return min(d, 10*time.Minute)
}

// attempt repairs one segment once, on one of its replicas (the next one on each retry, so a
// coordinator that hangs is not asked again and again), recording it before and after.
func (r *Repairer) attempt(ctx context.Context, run RunInfo, sg SegmentState, log *slog.Logger) outcome {
	sg.Attempts++
	var coord Target
	for k := range sg.Replicas {
		// Segments take turns among their replicas as coordinator, and a retry moves on.
		n := sg.Replicas[(sg.ID+sg.Attempts-1+k)%len(sg.Replicas)]
		if t, ok := r.targets[n]; ok {
			coord = t
			break
		}
	}
	sg.State, sg.Coordinator, sg.Updated = SegRunning, coord.Node, time.Now()
	if err := r.store.SetSegment(ctx, run.ID, sg); err != nil {
		sg.State = SegPending
		return outcome{seg: sg, err: err}
	}
	args := []string{"repair", "-st", sg.Start, "-et", sg.End}
	if !run.Incremental {
		args = append(args, "-full")
	}
	args = append(args, run.Keyspace)
	args = append(args, run.Tables...)
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, r.o.SegmentTimeout)
	_, err := r.nt.Run(sctx, coord, args...)
	timedOut := errors.Is(sctx.Err(), context.DeadlineExceeded)
	cancel()
	took := time.Since(start)
	if ctx.Err() != nil {
		// Stopped (shutdown, abort): the segment stays "running"; whoever resumes retries it.
		return outcome{seg: sg, took: took, err: ctx.Err()}
	}
	if timedOut {
		err = fmt.Errorf("segment %d timed out after %s on %s: %w", sg.ID, r.o.SegmentTimeout, coord.Node, err)
		r.stopServerSide(ctx, sg, run, log)
	}
	sg.Updated, sg.Duration = time.Now(), took
	switch {
	case err == nil:
		sg.State, sg.LastError = SegDone, ""
	case sg.Attempts >= r.o.MaxAttempts:
		sg.State, sg.LastError = SegFailed, errText(err)
	default:
		sg.State, sg.LastError = SegPending, errText(err)
	}
	// A record that fails leaves the segment "running" or pending: it is repaired again, which
	// is safe, never skipped.
	wctx, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer wcancel()
	if werr := r.store.SetSegment(wctx, run.ID, sg); werr != nil && err == nil {
		log.Warn("segment done but not recorded; it will be repaired again", "segment", sg.ID, "err", werr)
	}
	if err == nil {
		log.Info("repair segment done", "segment", sg.ID, "coordinator", coord.Node, "took", took.Round(time.Millisecond), "attempt", sg.Attempts)
	}
	return outcome{seg: sg, took: took, err: err}
}

// stopServerSide: killing nodetool does not stop the repair in the server. Cassandra 5.0 has no
// nodetool verb that ends one full repair session; `nodetool stop VALIDATION` on each replica
// aborts the Merkle-tree builds, the costly part, and the session then fails on its own. The
// calls are best effort and bounded: a replica that hangs (the likely reason for the timeout)
// does not answer.
func (r *Repairer) stopServerSide(ctx context.Context, sg SegmentState, run RunInfo, log *slog.Logger) {
	var wg sync.WaitGroup
	for _, n := range sg.Replicas {
		t, ok := r.targets[n]
		if !ok {
			continue
		}
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, min(r.o.SegmentTimeout, 20*time.Second))
			defer cancel()
			if _, err := r.nt.Run(sctx, t, "stop", "VALIDATION"); err != nil {
				log.Warn("could not stop the validations of a timed-out segment", "segment", sg.ID, "node", n, "err", err)
			}
		})
	}
	wg.Wait()
}

// errText keeps a segment's error short enough for its row.
func errText(err error) string {
	s := strings.TrimSpace(err.Error())
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return s
}
