package mongomove

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/outbox"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// steps are the copy's units, in order; State.Done records those finished.
var steps = []string{"products", "users", "orders", "cart_fences", "outbox"}

// batch is how many rows one bulk write carries.
const batch = 1000

// copy copies every step not yet done, at one read snapshot.
func (m *Mover) copy(ctx context.Context, s *State) error {
	snap, err := m.Src.ReadSnapshot(ctx)
	if err != nil {
		return err
	}
	defer snap.Close()
	if s.Rows == nil {
		s.Rows = map[string]int64{}
	}
	for _, step := range steps {
		if s.done(step) {
			m.logf("copy %-11s done before (%d rows)", step, s.Rows[step])
			continue
		}
		start := time.Now()
		of := " (messages not yet applied by every consumer)"
		if step != "outbox" {
			total, err := snap.Count(ctx, step)
			if err != nil {
				return err
			}
			of = fmt.Sprintf("/%d", total)
		}
		n, err := m.copyStep(ctx, snap, step, func(done int64) {
			m.logf("copy %-11s %d%s, %.0f rows/s", step, done, of, float64(done)/max(time.Since(start).Seconds(), 1e-6))
			if m.MaxRate > 0 {
				time.Sleep(time.Until(start.Add(time.Duration(float64(done) / m.MaxRate * float64(time.Second)))))
			}
		})
		if err != nil {
			return fmt.Errorf("copy %s: %w", step, err)
		}
		s.Rows[step] = n
		s.CopyTime += time.Since(start)
		s.Done = append(s.Done, step)
		if err := m.save(ctx, *s); err != nil {
			return err
		}
	}
	s.Phase, s.CopiedAt = Copied, time.Now().UTC()
	return m.save(ctx, *s)
}

// writers is how many batches are written at once: a replica set's primary takes several
// bulk writes in parallel, and each waits for its majority acknowledgement.
const writers = 4

// copyRows streams rows from each into put, in batches written by up to writers at once.
func copyRows[T any](ctx context.Context, each func(context.Context, func(T) error) error, put func(context.Context, []T) error, progress func(int64)) (int64, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(writers)
	var mu sync.Mutex
	var done int64
	flush := func(rows []T) {
		g.Go(func() error {
			if err := put(gctx, rows); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			done += int64(len(rows))
			progress(done)
			return nil
		})
	}
	rows := make([]T, 0, batch)
	err := each(gctx, func(v T) error {
		rows = append(rows, v)
		if len(rows) == batch {
			flush(rows)
			rows = make([]T, 0, batch)
		}
		return gctx.Err()
	})
	if err == nil && len(rows) > 0 {
		flush(rows)
	}
	return done, errors.Join(err, g.Wait())
}

func (m *Mover) copyStep(ctx context.Context, snap *sqlitestore.ReadSnapshot, step string, progress func(int64)) (int64, error) {
	switch step {
	case "products":
		return copyRows[catalog.Product](ctx, snap.Products, m.Dst.PutProducts, progress)
	case "users":
		return copyRows[account.User](ctx, snap.Users, m.Dst.PutUsers, progress)
	case "orders":
		return copyRows[order.Order](ctx, snap.Orders, m.Dst.PutOrders, progress)
	case "cart_fences":
		return copyRows(ctx, func(ctx context.Context, fn func(mongostore.ClaimRow) error) error {
			return snap.CartFences(ctx, func(id string, at time.Time) error { return fn(mongostore.FenceClaim(id, at)) })
		}, m.Dst.PutClaims, progress)
	case "outbox":
		placed, checkpoints, counters, err := pendingOutbox(ctx, snap, m.Dst)
		if err != nil {
			return 0, err
		}
		if err := m.Dst.PutOutbox(ctx, placed, checkpoints, counters); err != nil {
			return 0, err
		}
		progress(int64(len(placed)))
		return int64(len(placed)), nil
	}
	return 0, fmt.Errorf("unknown step %q", step)
}

// pendingOutbox is the part of the outbox some consumer has not applied yet, placed in
// MongoDB's partitions, with every consumer's checkpoints there.
func pendingOutbox(ctx context.Context, snap *sqlitestore.ReadSnapshot, dst *mongostore.Store) (placed []mongostore.PlacedMessage, checkpoints map[string][]int64, counters []int64, err error) {
	applied, err := snap.Checkpoints(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	last, err := snap.LastSeq(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	var from int64 = -1
	for _, seq := range applied {
		if from < 0 || seq < from {
			from = seq
		}
	}
	from = max(from, 0)
	var msgs []outbox.Message
	if err := snap.Outbox(ctx, from, func(m outbox.Message) error { msgs = append(msgs, m); return nil }); err != nil {
		return nil, nil, nil, err
	}
	placed, checkpoints, counters = dst.PlaceOutbox(msgs, applied, last)
	return placed, checkpoints, counters, nil
}
