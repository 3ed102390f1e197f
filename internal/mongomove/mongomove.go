// Package mongomove moves the orders family (orders with their items and status, products
// with per-zone stock, users with their password hashes, idempotency keys, cart fences, the
// outbox and its consumers' checkpoints; the catalog read model is the products themselves)
// from the embedded store to MongoDB behind a short write freeze.
//
// Stock and orders cannot be written to two stores at once without risking an oversell, so
// instead of dual writes the family's writes stop: Run commits a freeze marker in the embedded
// store that every write transaction of the family reads inside itself (SQLite runs one writer
// at a time, so no write of the family commits after the marker), copies the family at one
// read snapshot into MongoDB as idempotent upserts keyed by the collections' shard keys, and
// verifies counts and checksums. Reads keep working throughout; frozen writes answer 503 with
// Retry-After. Cutover records that MongoDB holds the family (serve then runs with
// --placement orders=mongo,catalog=mongo); Rollback before cutover clears the copy and lifts
// the freeze, leaving the embedded store the source of truth.
//
// The progress is recorded in the embedded store (State), so a mover killed mid-copy is
// resumed by running it again (the freeze and the snapshot's content are unchanged, so a
// collection recorded as copied is skipped and the one in flight is copied again) or rolled
// back.
package mongomove

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/shardmart/shardmart/internal/family"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// Phases of a move, in order; RolledBack ends an abandoned one.
const (
	Frozen     = "frozen"      // writes refused, the copy under way (or killed: run again or roll back)
	Copied     = "copied"      // every collection copied
	Verified   = "verified"    // counts and checksums equal on both sides
	CutOver    = "cut-over"    // MongoDB holds the family; the embedded copy stays frozen
	RolledBack = "rolled-back" // abandoned before cutover: the embedded store is the source again
)

// Placement is the placement serve runs with once the family is cut over.
const Placement = "orders=mongo,catalog=mongo"

// State is a move's record, kept in the embedded store.
type State struct {
	Run        string           `json:"run"`
	Phase      string           `json:"phase"`
	Database   string           `json:"database"`
	FrozenAt   time.Time        `json:"frozen_at"`
	CopiedAt   time.Time        `json:"copied_at,omitzero"`
	VerifiedAt time.Time        `json:"verified_at,omitzero"`
	CutOverAt  time.Time        `json:"cut_over_at,omitzero"`
	EndedAt    time.Time        `json:"ended_at,omitzero"` // rollback
	Done       []string         `json:"done,omitempty"`    // collections copied in this run
	Rows       map[string]int64 `json:"rows,omitempty"`    // rows copied, by collection
	CopyTime   time.Duration    `json:"copy_time,omitempty"`
	Resumes    int              `json:"resumes,omitempty"`
}

// RowsPerSec is the copy's measured rate (0 when unknown).
func (s State) RowsPerSec() float64 {
	var n int64
	for _, r := range s.Rows {
		n += r
	}
	if s.CopyTime <= 0 {
		return 0
	}
	return float64(n) / s.CopyTime.Seconds()
}

// Mover moves the orders family from Src to Dst.
type Mover struct {
	Src *sqlitestore.DB
	Dst *mongostore.Store
	// Progress receives a line per step and per copied batch; nil: none.
	Progress io.Writer
	// MaxRate caps the rows copied per second (0: none), to spare a busy disk; it lengthens
	// the freeze.
	MaxRate float64
}

const fam = string(family.Orders)

// Load reads the recorded state; its Phase is "" when no move was started.
func (m *Mover) Load(ctx context.Context) (State, error) {
	raw, err := m.Src.MoveState(ctx, fam)
	if err != nil || raw == "" {
		return State{}, err
	}
	var s State
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return State{}, fmt.Errorf("move state: %w", err)
	}
	return s, nil
}

func (m *Mover) save(ctx context.Context, s State) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return m.Src.SaveMoveState(ctx, fam, string(raw))
}

func (m *Mover) logf(format string, args ...any) {
	if m.Progress != nil {
		fmt.Fprintf(m.Progress, "orders: "+format+"\n", args...)
	}
}

// ErrCutOver refuses what a cut-over family no longer allows.
var ErrCutOver = errors.New("the orders family is cut over to MongoDB")

// Run freezes the family's writes (if not yet frozen), copies it and verifies the copy. A run
// killed at any point is resumed by calling Run again.
func (m *Mover) Run(ctx context.Context) (State, Report, error) {
	s, err := m.Load(ctx)
	if err != nil {
		return s, Report{}, err
	}
	switch s.Phase {
	case CutOver:
		return s, Report{}, fmt.Errorf("%w (at %s): nothing to copy", ErrCutOver, s.CutOverAt.Format(time.RFC3339))
	case Frozen, Copied, Verified:
		if name := m.Dst.Database().Name(); name != s.Database {
			return s, Report{}, fmt.Errorf("run %s copies into MongoDB database %s, not %s: resume it with --mongo-db %s, or roll it back", s.Run, s.Database, name, s.Database)
		}
		s.Resumes++
		m.logf("resuming run %s (frozen since %s, %d of %d steps copied)", s.Run, s.FrozenAt.Format(time.RFC3339Nano), len(s.Done), len(steps))
	default:
		if err := m.checkTargetEmpty(ctx); err != nil {
			return s, Report{}, err
		}
		s = State{Run: time.Now().UTC().Format("20060102T150405Z"), Database: m.Dst.Database().Name()}
	}
	if _, err := m.Dst.EnsureSchema(ctx, true); err != nil {
		return s, Report{}, fmt.Errorf("mongo schema: %w", err)
	}
	// The checkpoints freeze with the family: the copied checkpoints are then final, and a
	// message the embedded projector applied but could not checkpoint is applied again on
	// MongoDB (handlers are idempotent), never skipped.
	why := "moving to MongoDB database " + s.Database + " (run " + s.Run + ")"
	if s.FrozenAt, err = m.Src.Freeze(ctx, fam, why); err != nil {
		return s, Report{}, err
	}
	if _, err := m.Src.Freeze(ctx, sqlitestore.FreezeOutboxCheckpoints, why); err != nil {
		return s, Report{}, err
	}
	if s.Phase == "" {
		s.Phase = Frozen
	}
	if err := m.save(ctx, s); err != nil {
		return s, Report{}, err
	}
	m.logf("writes frozen at %s; copying to %s", s.FrozenAt.Format(time.RFC3339Nano), s.Database)
	if s.Phase == Frozen {
		if err := m.copy(ctx, &s); err != nil {
			return s, Report{}, err
		}
	}
	rep, err := m.verify(ctx, &s)
	return s, rep, err
}

// checkTargetEmpty refuses to copy over another shop's data.
func (m *Mover) checkTargetEmpty(ctx context.Context) error {
	counts, err := m.Dst.MovedCounts(ctx)
	if err != nil {
		return err
	}
	for _, c := range []string{"orders", "products", "users"} {
		if counts[c] > 0 {
			return fmt.Errorf("MongoDB database %s already holds %d %s: a move copies into an empty database (another shop's, or a copy this tool did not start?)",
				m.Dst.Database().Name(), counts[c], c)
		}
	}
	return nil
}

// Verify compares the copy with the embedded store again and records the result.
func (m *Mover) Verify(ctx context.Context) (Report, error) {
	s, err := m.Load(ctx)
	if err != nil {
		return Report{}, err
	}
	switch s.Phase {
	case "", RolledBack:
		return Report{}, errors.New("no move of the orders family to verify: run `migrate run --to mongo --family orders` first")
	case Frozen:
		return Report{}, fmt.Errorf("run %s has not finished copying: run `migrate run --to mongo --family orders` again to resume it", s.Run)
	}
	return m.verify(ctx, &s)
}

func (m *Mover) verify(ctx context.Context, s *State) (Report, error) {
	rep, err := Compare(ctx, m.Src, m.Dst)
	if err != nil {
		return rep, err
	}
	for _, c := range rep.Collections {
		m.logf("verify %-18s embedded %6d, mongo %6d, checksum %s", c.Name, c.Source, c.Target, c.verdict())
	}
	if !rep.Equal() {
		return rep, fmt.Errorf("verify: %d difference(s) between the embedded store and MongoDB: %s", rep.Differences(), rep.Summary())
	}
	if s.Phase == Copied || s.Phase == Frozen {
		s.Phase = Verified
	}
	s.VerifiedAt = time.Now().UTC()
	return rep, m.save(ctx, *s)
}

// Cutover records that MongoDB holds the family, after a passing verify (nothing changed
// since on either side: the family is frozen and no serve uses MongoDB for it yet, so it is
// not run again inside the freeze). The embedded store
// stays frozen: a serve started with the old placement answers 503 to the family's writes
// instead of forking the data.
func (m *Mover) Cutover(ctx context.Context) (State, error) {
	s, err := m.Load(ctx)
	if err != nil {
		return s, err
	}
	switch s.Phase {
	case CutOver:
		return s, nil
	case Verified:
	default:
		return s, fmt.Errorf("cutover needs a verified copy; the move is %q: run `migrate run --to mongo --family orders`", dashed(s.Phase))
	}
	s.Phase, s.CutOverAt = CutOver, time.Now().UTC()
	return s, m.save(ctx, s)
}

// Rollback abandons a move before cutover: it clears what was copied into MongoDB and lifts
// the freeze; the embedded store is the source of truth again and nothing it acknowledged is
// lost (it took no write of the family since the freeze). After cutover it refuses: MongoDB
// has taken writes the embedded store does not have.
func (m *Mover) Rollback(ctx context.Context) (State, error) {
	s, err := m.Load(ctx)
	if err != nil {
		return s, err
	}
	if s.Phase == CutOver {
		return s, fmt.Errorf("%w at %s and has taken writes there since: a rollback would lose them (the embedded copy stays frozen as it was at the freeze)",
			ErrCutOver, s.CutOverAt.Format(time.RFC3339))
	}
	// With nothing recorded a freeze may still stand (a mover killed before its first save):
	// it is lifted below, and there is no copy to clear.
	if s.Phase != "" && s.Phase != RolledBack {
		if name := m.Dst.Database().Name(); name != s.Database {
			return s, fmt.Errorf("run %s copied into MongoDB database %s, not %s: roll it back with --mongo-db %s", s.Run, s.Database, name, s.Database)
		}
		if err := m.Dst.ClearMoved(ctx); err != nil {
			return s, err
		}
		m.logf("cleared the copy in %s", s.Database)
	}
	for _, scope := range []string{fam, sqlitestore.FreezeOutboxCheckpoints} {
		if err := m.Src.Unfreeze(ctx, scope); err != nil {
			return s, err
		}
	}
	if s.Phase != "" {
		s.Phase, s.EndedAt, s.Done = RolledBack, time.Now().UTC(), nil
		if err := m.save(ctx, s); err != nil {
			return s, err
		}
	}
	m.logf("writes unfrozen: the embedded store serves the family again")
	return s, nil
}

func dashed(s string) string {
	if s == "" {
		return "not started"
	}
	return s
}

func (s *State) done(coll string) bool { return slices.Contains(s.Done, coll) }
