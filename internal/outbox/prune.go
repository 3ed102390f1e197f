package outbox

import (
	"context"
	"fmt"
	"time"
)

// The outbox would grow forever: every change appends a row and nothing deleted them. Prune
// deletes the rows every registered consumer has passed. It reads the consumers' checkpoints
// first and deletes at or below the lowest, which is safe against concurrent work because
//   - appends always take a seq above LastSeq, itself at or above every checkpoint;
//   - a checkpoint only moves forward, so a consumer reading after its checkpoint never needs
//     a row at or below the value Prune read;
//   - a consumer with no checkpoint yet is at 0 and holds every row.
// A consumer that is not registered is not waited for: register every consumer (serve
// registers the projector's), or its unread rows go.

// PruneResult says what one Prune did.
type PruneResult struct {
	Deleted int64
	// Behind is how many rows some consumer has not passed yet (over every partition), which
	// pruning must keep, and HeldBy the consumer furthest behind in the partition keeping the
	// most of them (empty when none): a stuck consumer holds pruning back, and this says which.
	HeldBy string
	Behind int64
}

// Prune deletes, partition by partition, the rows at or below the lowest checkpoint of the
// consumers. With no consumer it deletes nothing: nothing says who still needs the rows.
func Prune(ctx context.Context, log Log, consumers []string) (PruneResult, error) {
	var res PruneResult
	if len(consumers) == 0 {
		return res, nil
	}
	var most int64
	for _, part := range Parts(log) {
		low, slowest, err := lowestCheckpoint(ctx, part, consumers)
		if err != nil {
			return res, err
		}
		last, err := part.LastSeq(ctx)
		if err != nil {
			return res, fmt.Errorf("outbox: last seq: %w", err)
		}
		if behind := last - low; behind > most {
			most, res.HeldBy = behind, slowest
		}
		res.Behind += last - low
		if low == 0 {
			continue
		}
		n, err := part.DeleteOutbox(ctx, low)
		res.Deleted += n
		if err != nil {
			return res, fmt.Errorf("outbox: delete through %d: %w", low, err)
		}
	}
	return res, nil
}

// lowestCheckpoint is the lowest checkpoint of the consumers in one partition and whose it is.
func lowestCheckpoint(ctx context.Context, part Log, consumers []string) (int64, string, error) {
	low, slowest := int64(-1), ""
	for _, c := range consumers {
		cp, err := part.Checkpoint(ctx, c)
		if err != nil {
			return 0, "", fmt.Errorf("outbox: checkpoint of %s: %w", c, err)
		}
		if low < 0 || cp < low {
			low, slowest = cp, c
		}
	}
	return low, slowest, nil
}

// Stats describe the outbox for its metrics.
type Stats struct {
	Rows int64 // rows held, over every partition
	// OldestUnconsumed is when the oldest row some consumer has not passed was written; zero
	// when every consumer is up to date.
	OldestUnconsumed time.Time
}

// ReadStats counts the rows and finds the oldest one some consumer has not passed.
func ReadStats(ctx context.Context, log Log, consumers []string) (Stats, error) {
	var st Stats
	for _, part := range Parts(log) {
		n, err := part.CountOutbox(ctx)
		if err != nil {
			return st, fmt.Errorf("outbox: count: %w", err)
		}
		st.Rows += n
		if len(consumers) == 0 {
			continue
		}
		low, _, err := lowestCheckpoint(ctx, part, consumers)
		if err != nil {
			return st, err
		}
		next, err := part.ReadOutbox(ctx, low, 1)
		if err != nil {
			return st, fmt.Errorf("outbox: read after %d: %w", low, err)
		}
		if len(next) > 0 && (st.OldestUnconsumed.IsZero() || next[0].At.Before(st.OldestUnconsumed)) {
			st.OldestUnconsumed = next[0].At
		}
	}
	return st, nil
}
