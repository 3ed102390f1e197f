package placement

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/migrate"
)

// Following `shardmart migrate`'s state: the phase each family under the dual-write layer is
// in, as this process applies it, and its heartbeats, which `migrate run` and `migrate
// cutover` wait on.

// MigrationPhases returns the phase this process applies to each family under the dual-write layer.
func (s *Stores) MigrationPhases() map[Family]migrate.Phase {
	out := map[Family]migrate.Phase{}
	if s.dualWrite == nil {
		return out
	}
	for f, p := range s.dualWrite.phases {
		out[f] = p.get()
	}
	return out
}

// RefreshMigrations reads the migration state once, applies it, and reports the applied
// phases as writer (a heartbeat that lives 15 s).
func (s *Stores) RefreshMigrations(ctx context.Context, writer string) error {
	m := s.dualWrite
	if m == nil {
		return nil
	}
	states, err := m.target.States(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for f, ph := range m.phases {
		st := states[f]
		ph.set(st.Phase)
		if err := m.target.Heartbeat(ctx, f, writer, st.Phase); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WatchMigrations refreshes the migration state every `every` until ctx ends, calling
// applied with the phases after each refresh.
func (s *Stores) WatchMigrations(ctx context.Context, writer string, every time.Duration, onErr func(error), applied func(map[Family]migrate.Phase)) {
	if s.dualWrite == nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.RefreshMigrations(ctx, writer); err != nil && onErr != nil && ctx.Err() == nil {
			onErr(fmt.Errorf("refresh migration state: %w", err))
		}
		if applied != nil {
			applied(s.MigrationPhases())
		}
	}
}
