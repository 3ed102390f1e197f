package migrate

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// The phase moves: each from exactly one phase, refused from any other with ErrPhase (or a
// message naming what to do), and the run in progress resumed only under its name and source.
func TestPhaseTransitions(t *testing.T) {
	ctx := context.Background()
	_, s := keyspace(t)
	dst := NewTarget(s)
	phase := func(want Phase) {
		t.Helper()
		st, err := dst.State(ctx, Carts)
		if err != nil || st.Phase != want {
			t.Fatalf("carts in phase %q (%v), want %q", st.Phase, err, want)
		}
	}

	if _, err := dst.BeginCopy(ctx, Carts, FromSQLite, "", false); err == nil || !strings.Contains(err.Error(), "no shop process follows the migration state") {
		t.Fatalf("a copy with no shop process following the state: %v, want a refusal", err)
	}
	phase(PhaseNone)
	if _, err := dst.Cutover(ctx, Carts); !errors.Is(err, ErrPhase) {
		t.Fatalf("cutover of a family never copied: %v, want ErrPhase", err)
	}
	if err := dst.Heartbeat(ctx, Carts, "shop-1", PhaseNone); err != nil {
		t.Fatal(err)
	}
	start, err := dst.BeginCopy(ctx, Carts, FromSQLite, "", false)
	if err != nil || !start.Started || start.State.Run != "1" || start.State.Source != FromSQLite {
		t.Fatalf("first copy: %+v, %v; want started as run 1 from sqlite", start, err)
	}
	phase(DualWrite)
	if _, err := dst.BeginCopy(ctx, Carts, FromSQLite, "2", false); err == nil || !strings.Contains(err.Error(), "run 1 is in progress") {
		t.Fatalf("another run while run 1 is in progress: %v", err)
	}
	if _, err := dst.BeginCopy(ctx, Carts, FromMongo, "", false); err == nil || !strings.Contains(err.Error(), "reads from sqlite, not mongo") {
		t.Fatalf("resume from another store: %v", err)
	}
	again, err := dst.BeginCopy(ctx, Carts, FromSQLite, "", false)
	if err != nil || !again.Resumed || again.State.Run != "1" {
		t.Fatalf("resume: %+v, %v", again, err)
	}
	if marked, err := dst.MarkVerified(ctx, Carts, 10); err != nil || marked {
		t.Fatalf("a verify during the copy marked the family verified (%v, %v)", marked, err)
	}
	if err := dst.FinishCopy(ctx, again.State); err != nil {
		t.Fatal(err)
	}
	phase(Copied)
	if done, err := dst.BeginCopy(ctx, Carts, FromSQLite, "", false); err != nil || done.Copying() {
		t.Fatalf("copy of a copied family: %+v, %v; want nothing to copy", done, err)
	}
	if _, err := dst.Cutover(ctx, Carts); !errors.Is(err, ErrPhase) {
		t.Fatalf("cutover before a passing verify: %v, want ErrPhase", err)
	}
	if marked, err := dst.MarkVerified(ctx, Carts, 10); err != nil || !marked {
		t.Fatalf("verify of a copied family: %v, %v", marked, err)
	}
	if st, _ := dst.State(ctx, Carts); st.Phase != Verified || st.Rows != 10 || st.VerifiedAt.IsZero() {
		t.Fatalf("after a passing verify: %+v", st)
	}
	if _, err := dst.Rollback(ctx, Carts); !errors.Is(err, ErrPhase) {
		t.Fatalf("rollback of a family not cut over: %v, want ErrPhase", err)
	}
	if st, err := dst.Cutover(ctx, Carts); err != nil || st.Phase != Cutover {
		t.Fatalf("cutover: %+v, %v", st, err)
	}
	phase(Cutover)
	st, err := dst.Rollback(ctx, Carts)
	if err != nil || st.Phase != Copied || !strings.HasPrefix(st.Note, "rolled back ") {
		t.Fatalf("rollback: %+v, %v", st, err)
	}
	phase(Copied)
}
