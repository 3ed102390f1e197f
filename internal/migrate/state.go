package migrate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// State is a family's row in migration_state.
type State struct {
	Family     Family
	Phase      Phase
	Source     string // sqlite or mongo
	Run        string
	VerifiedAt time.Time
	Rows       int64 // rows the last verify compared
	ChangedAt  time.Time
	Note       string
}

// States returns every family's state; a family never migrated has PhaseNone.
func (t *Target) States(ctx context.Context) (map[Family]State, error) {
	out := map[Family]State{}
	for _, f := range Families {
		out[f] = State{Family: f}
	}
	iter := t.s.Query(`SELECT family, phase, source, run, verified_at, rows, changed_at, note FROM migration_state`).
		WithContext(ctx).Consistency(gocql.Quorum).Iter()
	for {
		var s State
		var fam, phase string
		if !iter.Scan(&fam, &phase, &s.Source, &s.Run, &s.VerifiedAt, &s.Rows, &s.ChangedAt, &s.Note) {
			break
		}
		p, err := ParsePhase(phase)
		if err != nil {
			continue // a newer version's phase: leave it to that version
		}
		s.Family, s.Phase = Family(fam), p
		out[s.Family] = s
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("migrate: read migration state: %w", err)
	}
	return out, nil
}

// stateIn is family f's state among those states reads (every target's State).
func stateIn(ctx context.Context, states func(context.Context) (map[Family]State, error), f Family) (State, error) {
	all, err := states(ctx)
	if err != nil {
		return State{}, err
	}
	return all[f], nil
}

// State returns family f's state.
func (t *Target) State(ctx context.Context, f Family) (State, error) {
	return stateIn(ctx, t.States, f)
}

// SetState moves f from phase `from` to s.Phase with a lightweight transaction, so two
// operators (or a retried command) cannot both move it: ErrPhase says where it stands.
func (t *Target) SetState(ctx context.Context, from Phase, s State) error {
	if s.ChangedAt.IsZero() {
		s.ChangedAt = time.Now().UTC()
	}
	var q *gocql.Query
	args := []any{string(s.Phase), s.Source, s.Run, tsOrUnset(s.VerifiedAt), s.Rows, s.ChangedAt, s.Note, string(s.Family)}
	const set = `UPDATE migration_state SET phase = ?, source = ?, run = ?, verified_at = ?, rows = ?, changed_at = ?, note = ? WHERE family = ?`
	if from == PhaseNone {
		q = t.s.Query(set+` IF phase = null`, args...)
	} else {
		q = t.s.Query(set+` IF phase = ?`, append(args, string(from))...)
	}
	applied, err := q.WithContext(ctx).Consistency(gocql.Quorum).SerialConsistency(gocql.Serial).MapScanCAS(map[string]any{})
	if err != nil {
		return fmt.Errorf("migrate: set %s to %s: %w", s.Family, s.Phase, err)
	}
	if !applied {
		cur, err := t.State(ctx, s.Family)
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: %s is in phase %q, not %q", ErrPhase, s.Family, cur.Phase, from)
	}
	return nil
}

func tsOrUnset(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

// Plan returns the split points of run's ranges for f, fixing them with points when the run
// has none yet (the first start); a resumed run gets its first start's points.
func (t *Target) Plan(ctx context.Context, run string, f Family, points []string) ([]string, error) {
	if points == nil {
		points = []string{}
	}
	m := map[string]any{}
	applied, err := t.s.Query(`INSERT INTO migration_runs (run, family, points, started_at) VALUES (?, ?, ?, ?) IF NOT EXISTS`,
		run, string(f), points, time.Now().UTC()).WithContext(ctx).Consistency(gocql.Quorum).SerialConsistency(gocql.Serial).MapScanCAS(m)
	if err != nil {
		return nil, fmt.Errorf("migrate: fix the ranges of run %s: %w", run, err)
	}
	if applied {
		return points, nil
	}
	var got []string
	if err := t.s.Query(`SELECT points FROM migration_runs WHERE run = ? AND family = ?`, run, string(f)).
		WithContext(ctx).Consistency(gocql.Serial).Scan(&got); err != nil {
		return nil, fmt.Errorf("migrate: read the ranges of run %s: %w", run, err)
	}
	return got, nil
}

// Writer is a shop process applying a phase to a family.
type Writer struct {
	ID     string
	Phase  Phase
	SeenAt time.Time
}

// Heartbeat records that writer applies phase to f (the row expires 15 s after its last beat).
func (t *Target) Heartbeat(ctx context.Context, f Family, writer string, p Phase) error {
	err := t.s.Query(`INSERT INTO migration_writers (family, writer, phase, seen_at) VALUES (?, ?, ?, ?)`,
		string(f), writer, string(p), time.Now().UTC()).WithContext(ctx).Consistency(gocql.Quorum).Exec()
	if err != nil {
		return fmt.Errorf("migrate: heartbeat: %w", err)
	}
	return nil
}

// Writers lists the live shop processes of f, by id.
func (t *Target) Writers(ctx context.Context, f Family) ([]Writer, error) {
	iter := t.s.Query(`SELECT writer, phase, seen_at FROM migration_writers WHERE family = ?`, string(f)).
		WithContext(ctx).Consistency(gocql.Quorum).Iter()
	var out []Writer
	var w Writer
	var phase string
	for iter.Scan(&w.ID, &phase, &w.SeenAt) {
		w.Phase = Phase(phase)
		out = append(out, w)
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("migrate: read writers: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// WaitWriters waits until every live writer of f applies one of want and returns them; it
// gives up when ctx ends, naming those that do not.
func (t *Target) WaitWriters(ctx context.Context, f Family, poll time.Duration, want ...Phase) ([]Writer, error) {
	return waitWriters(ctx, t, f, poll, want...)
}

func waitWriters(ctx context.Context, t phaseStore, f Family, poll time.Duration, want ...Phase) ([]Writer, error) {
	for {
		ws, err := t.Writers(ctx, f)
		if err != nil {
			return nil, err
		}
		var behind []string
		for _, w := range ws {
			ok := false
			for _, p := range want {
				ok = ok || w.Phase == p
			}
			if !ok {
				behind = append(behind, fmt.Sprintf("%s (%s)", w.ID, w.Phase))
			}
		}
		if len(behind) == 0 {
			return ws, nil
		}
		select {
		case <-ctx.Done():
			return ws, fmt.Errorf("migrate: shop processes still not applying %v to %s: %v: %w", want, f, behind, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// PlannedRanges is the number of ranges run cut f into (0 before it started).
func (t *Target) PlannedRanges(ctx context.Context, run string, f Family) (int, error) {
	var points []string
	err := t.s.Query(`SELECT points FROM migration_runs WHERE run = ? AND family = ?`, run, string(f)).
		WithContext(ctx).Consistency(gocql.Quorum).Scan(&points)
	if errors.Is(err, gocql.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("migrate: read the ranges of run %s: %w", run, err)
	}
	return len(points) + 1, nil
}
