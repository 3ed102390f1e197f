package dualwrite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/migrate"
)

// Following `shardmart migrate`'s state: the phase each family under the dual-write layer is
// in, as this process applies it, and its heartbeats, which `migrate run` and `migrate
// cutover` wait on.

// MigrationPhases returns the phase this process applies to each family under the dual-write layer.
// A nil layer (migrations off) has none.
func (m *Layer) MigrationPhases() map[family.Name]migrate.Phase {
	out := map[family.Name]migrate.Phase{}
	if m == nil {
		return out
	}
	for f, p := range m.phases {
		out[f] = p.get()
	}
	return out
}

// RefreshMigrations reads the migration state once, applies it, and reports the applied
// phases as writer (a heartbeat that lives 15 s).
func (m *Layer) RefreshMigrations(ctx context.Context, writer string) error {
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
func (m *Layer) WatchMigrations(ctx context.Context, writer string, every time.Duration, onErr func(error), applied func(map[family.Name]migrate.Phase)) {
	if m == nil {
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
		if err := m.RefreshMigrations(ctx, writer); err != nil && onErr != nil && ctx.Err() == nil {
			onErr(fmt.Errorf("refresh migration state: %w", err))
		}
		if applied != nil {
			applied(m.MigrationPhases())
		}
	}
}
