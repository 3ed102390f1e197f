package shop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/outbox"
)

// RunOptions tune the shop's background work.
type RunOptions struct {
	// ProjectEvery is how often the projector drains the outbox when nothing asks it to
	// (0: a second).
	ProjectEvery time.Duration
	// PurgeEvery is how often expired sessions, guest carts, events past EventRetention and
	// consumed outbox rows are deleted (0: a minute).
	PurgeEvery     time.Duration
	EventRetention time.Duration
	// MigrationPoll is how often the migration state is read with Backends.Migrations (0: 2 s).
	MigrationPoll time.Duration
	Logger        *slog.Logger
}

// Run runs the shop's background work until ctx ends: the outbox projector, the purge of
// expired data, the card cache's outbox tail and, when the stores follow a migration, the
// migration state. It returns once every loop has stopped, so the caller may close the stores.
func (s *Shop) Run(ctx context.Context, o RunOptions) error {
	if o.ProjectEvery <= 0 {
		o.ProjectEvery = time.Second
	}
	if o.PurgeEvery <= 0 {
		o.PurgeEvery = time.Minute
	}
	if o.MigrationPoll <= 0 {
		o.MigrationPoll = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { s.Projector.Run(ctx, o.ProjectEvery); return nil })
	g.Go(func() error { s.purge(ctx, o.PurgeEvery, o.EventRetention, o.Logger); return nil })
	g.Go(func() error { s.watchMigrations(ctx, o.MigrationPoll, o.Logger); return nil })
	g.Go(func() error { s.FollowChanges(ctx); return nil })
	return g.Wait()
}

// watchMigrations applies the migration state every poll and heartbeats the applied phases
// under this process's writer id, until ctx ends. Without migrations it returns at once.
func (s *Shop) watchMigrations(ctx context.Context, poll time.Duration, logger *slog.Logger) {
	phases := s.Migrations.MigrationPhases()
	if len(phases) == 0 {
		return
	}
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	writer := fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	logger.Info("following the migration state", "writer", writer, "phases", phases)
	if err := s.Migrations.RefreshMigrations(ctx, writer); err != nil {
		logger.Warn("migration state", "err", err)
	}
	last := s.Migrations.MigrationPhases()
	s.Migrations.WatchMigrations(ctx, writer, poll, func(err error) { logger.Warn("migration state", "err", err) }, func(now map[family.Name]migrate.Phase) {
		for f, p := range now {
			if last[f] != p {
				logger.Info("migration phase changed", "family", f, "from", last[f], "to", p)
			}
		}
		last = now
	})
}

// purge deletes expired sessions and guest carts (reads already hide them at once), events
// past the retention, and the outbox rows every consumer has passed.
func (s *Shop) purge(ctx context.Context, every, eventRetention time.Duration, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now().UTC()
		if n, err := s.Stores.Sessions.PurgeExpired(ctx, now); err != nil {
			logger.Warn("purge sessions", "err", err)
		} else if n > 0 {
			logger.Info("purged expired sessions", "count", n)
		}
		if n, err := s.Stores.Carts.PurgeExpired(ctx, now); err != nil {
			logger.Warn("purge guest carts", "err", err)
		} else if n > 0 {
			logger.Info("purged expired guest carts", "count", n)
		}
		if n, err := s.Stores.Events.PurgeEvents(ctx, event.Cutoff(now, eventRetention)); err != nil {
			logger.Warn("purge events", "err", err)
		} else if n > 0 {
			logger.Info("purged events past the retention", "count", n, "retention", eventRetention)
		}
		if res, err := outbox.Prune(ctx, s.Stores.Outbox, s.OutboxConsumers()); err != nil {
			logger.Warn("prune outbox", "err", err)
		} else if res.Deleted > 0 || res.Behind > 0 {
			// held_by names the consumer furthest behind: a stuck one keeps every row after it.
			logger.Info("pruned outbox", "deleted", res.Deleted, "kept_unconsumed", res.Behind, "held_by", res.HeldBy)
		}
	}
}
