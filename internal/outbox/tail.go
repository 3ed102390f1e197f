package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Tail follows the outbox from this process's own in-memory position, never a shared
// checkpoint, and hands every message to its handlers: each API process sees every change,
// whichever process's projector applied it (the projector's checkpoint is shared, so only one
// process would see a message through it). It keeps no state anywhere: it starts at the end of
// the log and, when it may have missed messages (a gap in a partition's seqs: rows pruned before
// it read them), calls Reset and starts again from the end.
//
// With a ceiling consumer it reads no further than that consumer's checkpoint, so it sees a
// message only once the projector has applied it (a read model in another store is then
// updated before the tail's handlers run).
type Tail struct {
	log      Log
	ceiling  string
	handlers map[string][]Handler
	// Reset is called when the tail may have missed messages, before it moves to the end of
	// the log: drop whatever the handlers would have invalidated.
	Reset func()

	mu    sync.Mutex // one Poll at a time
	parts []Log
	pos   []int64
	// state, guarded by stMu: read by metrics and readiness while a poll runs.
	stMu     sync.Mutex
	caughtUp time.Time // start of the last poll that read every partition to its end
	lastErr  error
	resets   int64
	started  bool
	now      func() time.Time
}

// NewTail follows log; ceiling, if not empty, is the consumer whose checkpoint it stays behind.
func NewTail(log Log, ceiling string) *Tail {
	return &Tail{log: log, ceiling: ceiling, handlers: map[string][]Handler{}, now: time.Now}
}

// Handle registers h for topic; register everything before Poll or Run. Handlers of different
// partitions run concurrently.
func (t *Tail) Handle(topic string, h Handler) { t.handlers[topic] = append(t.handlers[topic], h) }

// Poll reads every partition from the tail's position to its end (or the ceiling) and applies
// what it finds. The first Poll only takes the positions: what came before is in the stores.
func (t *Tail) Poll(ctx context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	start := t.now()
	err := t.poll(ctx)
	t.stMu.Lock()
	defer t.stMu.Unlock()
	t.lastErr = err
	if err == nil {
		t.caughtUp, t.started = start, true
	}
	return err
}

func (t *Tail) poll(ctx context.Context) error {
	if t.parts == nil {
		parts := Parts(t.log)
		pos, err := t.ends(ctx, parts)
		if err != nil {
			return err
		}
		t.parts, t.pos = parts, pos
		return nil
	}
	// Where the partitions end, in one read when the log says (Positions); -1: each partition
	// reads its own end.
	upto, err := t.positions(ctx, len(t.parts))
	if err != nil {
		return fmt.Errorf("outbox tail: end: %w", err)
	}
	// Partitions are read at once: a poll then costs one round trip, not one per partition
	// (16 on MongoDB), and each goroutine owns its partition's position.
	gaps := make([]bool, len(t.parts))
	errs := make([]error, len(t.parts))
	var wg sync.WaitGroup
	for i, part := range t.parts {
		if upto != nil && t.pos[i] >= upto[i] {
			continue // nothing new: no read
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			end := int64(-1)
			if upto != nil {
				end = upto[i]
			}
			gaps[i], errs[i] = t.follow(ctx, part, i, end)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if slices.Contains(gaps, true) {
		return t.restart(ctx)
	}
	return nil
}

// positions is how far the tail may read each partition now, in one read when the log says
// where its partitions stand (Positions), else nil.
func (t *Tail) positions(ctx context.Context, n int) ([]int64, error) {
	pos, ok := t.log.(Positions)
	if !ok || n == 1 {
		return nil, nil
	}
	var upto []int64
	var err error
	if t.ceiling != "" {
		upto, err = pos.Checkpoints(ctx, t.ceiling)
	} else {
		upto, err = pos.LastSeqs(ctx)
	}
	if err != nil {
		return nil, err
	}
	if len(upto) != n {
		return nil, fmt.Errorf("positions of %d partitions, want %d", len(upto), n)
	}
	return upto, nil
}

// ends is the position to start each partition from: its last seq, or the ceiling's checkpoint.
func (t *Tail) ends(ctx context.Context, parts []Log) ([]int64, error) {
	if pos, err := t.positions(ctx, len(parts)); err != nil || pos != nil {
		if err != nil {
			return nil, fmt.Errorf("outbox tail: start position: %w", err)
		}
		return pos, nil
	}
	pos := make([]int64, len(parts))
	for i, part := range parts {
		var err error
		if pos[i], err = t.end(ctx, part); err != nil {
			return nil, fmt.Errorf("outbox tail: start position: %w", err)
		}
	}
	return pos, nil
}

// end is how far the tail may read part now: the ceiling's checkpoint, or the last seq.
func (t *Tail) end(ctx context.Context, part Log) (int64, error) {
	if t.ceiling != "" {
		return part.Checkpoint(ctx, t.ceiling)
	}
	return part.LastSeq(ctx)
}

// restart moves every partition to its end after Reset: the stores hold everything before it.
// The positions are read before Reset, so a change committed in between is read again, never
// skipped.
func (t *Tail) restart(ctx context.Context) error {
	pos, err := t.ends(ctx, t.parts)
	if err != nil {
		return err
	}
	if t.Reset != nil {
		t.Reset()
	}
	t.pos = pos
	t.stMu.Lock()
	t.resets++
	t.stMu.Unlock()
	return nil
}

// follow applies one partition's new messages, up to its end as read first; gap reports a
// missing seq (rows pruned before the tail read them): seqs are dense within a partition (an
// aborted append leaves no hole, in SQLite or MongoDB), so a hole means rows this tail never
// saw. Every seq up to the end was committed (and, with a ceiling, applied), so a read that
// finds none of them, or starts past the next one, is a gap too: pruning deletes exactly
// through the checkpoint, and the rows the tail had not read yet may be all that was there.
func (t *Tail) follow(ctx context.Context, part Log, i int, upto int64) (gap bool, err error) {
	if upto < 0 {
		if upto, err = t.end(ctx, part); err != nil {
			return false, fmt.Errorf("outbox tail: end: %w", err)
		}
	}
	for t.pos[i] < upto {
		msgs, err := part.ReadOutbox(ctx, t.pos[i], 256)
		if err != nil {
			return false, fmt.Errorf("outbox tail: read after %d: %w", t.pos[i], err)
		}
		if len(msgs) == 0 {
			return true, nil
		}
		for _, m := range msgs {
			if m.Seq != t.pos[i]+1 {
				return true, nil
			}
			if m.Seq > upto {
				return false, nil // not applied yet, or committed after this poll began
			}
			for _, h := range t.handlers[m.Topic] {
				if err := h(ctx, m); err != nil {
					return false, fmt.Errorf("outbox tail: apply %s #%d: %w", m.Topic, m.Seq, err)
				}
			}
			t.pos[i] = m.Seq
		}
	}
	return false, nil
}

// Run polls every interval until ctx ends; errors are kept for Behind and retried.
func (t *Tail) Run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		_ = t.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// TailState is how far behind the tail may be.
type TailState struct {
	// Behind is the time since the start of the last poll that read everything: every change
	// committed (and, with a ceiling, applied) before then has been handed to the handlers.
	Behind time.Duration
	// Err is the last poll's error (nil when it succeeded).
	Err error
	// Started is false until the first poll succeeded.
	Started bool
	// Resets counts the restarts after a gap.
	Resets int64
}

// State says how far behind the tail is now.
func (t *Tail) State() TailState {
	t.stMu.Lock()
	defer t.stMu.Unlock()
	st := TailState{Err: t.lastErr, Started: t.started, Resets: t.resets}
	if t.started {
		st.Behind = t.now().Sub(t.caughtUp)
	}
	return st
}
