package migrate

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Phase is where a family's migration stands. The old store is the source of truth until
// Cutover; from Cutover on, Cassandra is.
type Phase string

const (
	// PhaseNone: not migrating; the family lives where the placement says.
	PhaseNone Phase = ""
	// DualWrite: shop processes write the old store, then copy each changed key into Cassandra;
	// the backfill runs (or ran) underneath.
	DualWrite Phase = "dual_write"
	// Copied: the backfill finished; dual writes continue.
	Copied Phase = "copied"
	// Verified: a verify found 0 differences; dual writes continue; cutover is allowed.
	Verified Phase = "verified"
	// Cutover: shop processes read and write the family in Cassandra, and keep the old store
	// updated for a rollback where the family allows it (docs/migration.md).
	Cutover Phase = "cutover"
)

// ParsePhase accepts a stored phase.
func ParsePhase(s string) (Phase, error) {
	switch p := Phase(s); p {
	case PhaseNone, DualWrite, Copied, Verified, Cutover:
		return p, nil
	}
	return "", fmt.Errorf("migrate: unknown phase %q", s)
}

// Mirrors reports whether shop processes copy their writes of the family into Cassandra.
func (p Phase) Mirrors() bool { return p == DualWrite || p == Copied || p == Verified }

// ErrPhase is returned when a step is asked of a family in the wrong phase.
var ErrPhase = errors.New("migrate: wrong phase")

// The phases a family goes through, and the only moves between them (each a lightweight
// transaction from exactly one phase, SetState):
//
//	(none) --BeginCopy--> dual_write --FinishCopy--> copied --MarkVerified--> verified
//	verified --Cutover--> cutover --Rollback--> copied
//
// A verify that finds differences leaves the phase as it is; `verify --repair` copies the
// differing keys again and verifies again.

// CopyStart is what BeginCopy found or did.
type CopyStart struct {
	State State
	// Started: dual writes were turned on now (the family had no phase); Resumed: the run in
	// progress goes on. Neither: the family is already copied, verified or cut over.
	Started, Resumed bool
}

// Copying reports whether the backfill has to run.
func (c CopyStart) Copying() bool { return c.Started || c.Resumed }

// BeginCopy turns dual writes on for f, reading from source under run ("": "1"), or finds
// the run in progress to resume. A family with no phase starts only if a shop process follows
// the state (a writer has reported) or offline is set (the shop is stopped): a shop process
// not following the state would write without copying. A run in progress resumes only under
// its own name and source.
func (t *Target) BeginCopy(ctx context.Context, f Family, source, run string, offline bool) (CopyStart, error) {
	return beginCopy(ctx, t, f, source, run, offline)
}

// phaseStore is where a migration's state lives: Cassandra (Target) or MongoDB (MongoTarget).
// SetState is a compare-and-set from one phase.
type phaseStore interface {
	State(ctx context.Context, f Family) (State, error)
	SetState(ctx context.Context, from Phase, s State) error
	Writers(ctx context.Context, f Family) ([]Writer, error)
}

func beginCopy(ctx context.Context, t phaseStore, f Family, source, run string, offline bool) (CopyStart, error) {
	st, err := t.State(ctx, f)
	if err != nil {
		return CopyStart{}, err
	}
	switch st.Phase {
	case PhaseNone:
		ws, err := t.Writers(ctx, f)
		if err != nil {
			return CopyStart{}, err
		}
		if len(ws) == 0 && !offline {
			return CopyStart{}, fmt.Errorf("%s: no shop process follows the migration state: start every shop process with serve --migrations (writes of one that does not are missed), or pass --offline if the shop is stopped", f)
		}
		if run == "" {
			run = "1"
		}
		st = State{Family: f, Phase: DualWrite, Source: source, Run: run}
		if err := t.SetState(ctx, PhaseNone, st); err != nil {
			return CopyStart{}, err
		}
		return CopyStart{State: st, Started: true}, nil
	case DualWrite:
		if run != "" && run != st.Run {
			return CopyStart{}, fmt.Errorf("%s: run %s is in progress; resume it (omit --run) or finish it", f, st.Run)
		}
		if st.Source != source {
			return CopyStart{}, fmt.Errorf("%s: the migration in progress reads from %s, not %s", f, st.Source, source)
		}
		return CopyStart{State: st, Resumed: true}, nil
	}
	// Copied, verified or cut over: a rerun of `run --family all` after a kill goes on with
	// the families not yet copied.
	return CopyStart{State: st}, nil
}

// FinishCopy moves st's family from dual_write to copied once its backfill finished.
func (t *Target) FinishCopy(ctx context.Context, st State) error { return finishCopy(ctx, t, st) }

func finishCopy(ctx context.Context, t phaseStore, st State) error {
	st.Phase, st.ChangedAt = Copied, time.Time{}
	return t.SetState(ctx, DualWrite, st)
}

// MarkVerified moves f from copied to verified after a verify compared rows with no
// difference, and reports whether it did: in any other phase a passing verify changes nothing.
func (t *Target) MarkVerified(ctx context.Context, f Family, rows int64) (bool, error) {
	return markVerified(ctx, t, f, rows)
}

func markVerified(ctx context.Context, t phaseStore, f Family, rows int64) (bool, error) {
	st, err := t.State(ctx, f)
	if err != nil {
		return false, err
	}
	if st.Phase != Copied {
		return false, nil
	}
	st.Phase, st.VerifiedAt, st.Rows, st.ChangedAt = Verified, time.Now().UTC(), rows, time.Time{}
	return true, t.SetState(ctx, Copied, st)
}

// Cutover moves f from verified to cutover: shop processes serve it from Cassandra.
func (t *Target) Cutover(ctx context.Context, f Family) (State, error) {
	return move(ctx, t, f, Verified, Cutover, cutoverWhy, "")
}

// Rollback moves f from cutover back to copied: the old store serves it again and dual writes
// resume, so a verify can pass again before the next cutover.
func (t *Target) Rollback(ctx context.Context, f Family) (State, error) {
	return move(ctx, t, f, Cutover, Copied, rollbackWhy, rollbackNote())
}

const (
	cutoverWhy  = "cutover needs a passing verify first (migrate verify)"
	rollbackWhy = "only a cut-over family rolls back"
)

func rollbackNote() string { return "rolled back " + time.Now().UTC().Format(time.RFC3339) }

func move(ctx context.Context, t phaseStore, f Family, from, to Phase, why, note string) (State, error) {
	st, err := t.State(ctx, f)
	if err != nil {
		return st, err
	}
	if st.Phase != from {
		return st, fmt.Errorf("%s: %w: phase %s; %s", f, ErrPhase, PhaseName(st.Phase), why)
	}
	st.Phase, st.ChangedAt = to, time.Time{}
	if note != "" {
		st.Note = note
	}
	return st, t.SetState(ctx, from, st)
}

// PhaseName is p for display: "-" for no phase.
func PhaseName(p Phase) string {
	if p == PhaseNone {
		return "-"
	}
	return string(p)
}
