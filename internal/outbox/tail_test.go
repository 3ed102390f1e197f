package outbox

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// tailSeen records what a tail's handler was given.
func tailSeen(tail *Tail) *[]int64 {
	var seen []int64
	tail.Handle("t", func(_ context.Context, m Message) error { seen = append(seen, m.Seq); return nil })
	return &seen
}

// TestTailFollowsFromItsOwnPosition: a tail starts at the end of the log and then hands over
// every message once, in order, whatever any consumer's checkpoint says (another process's
// projector may have applied them all).
func TestTailFollowsFromItsOwnPosition(t *testing.T) {
	ctx := context.Background()
	log := &memLog{cp: map[string]int64{}}
	log.commit("t")
	log.commit("t")
	tail := NewTail(log, "")
	seen := tailSeen(tail)
	if err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if len(*seen) != 0 {
		t.Fatalf("first poll handed over %v; want nothing (what came before is in the stores)", *seen)
	}
	for range 300 {
		log.commit("t")
	}
	log.cp["projector"] = log.last // another process applied everything
	if err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	want := make([]int64, 300)
	for i := range want {
		want[i] = int64(i + 3)
	}
	if !slices.Equal(*seen, want) {
		t.Errorf("handed over %d messages %v..., want 3..302 once each, in order", len(*seen), (*seen)[:min(5, len(*seen))])
	}
}

// TestTailStaysBehindItsCeiling: with a ceiling consumer the tail hands over a message only
// once that consumer's checkpoint has passed it.
func TestTailStaysBehindItsCeiling(t *testing.T) {
	ctx := context.Background()
	log := &memLog{cp: map[string]int64{}}
	tail := NewTail(log, "projector")
	seen := tailSeen(tail)
	if err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		log.commit("t")
	}
	if err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if len(*seen) != 0 {
		t.Fatalf("handed over %v before the projector applied anything", *seen)
	}
	log.cp["projector"] = 3
	if err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*seen, []int64{1, 2, 3}) {
		t.Errorf("handed over %v with the projector at 3, want [1 2 3]", *seen)
	}
}

// TestTailResetsAfterAGap: rows pruned before the tail read them (a gap in the seqs) make it
// call Reset, move to the end and go on from there; State counts the reset.
func TestTailResetsAfterAGap(t *testing.T) {
	ctx := context.Background()
	log := &memLog{cp: map[string]int64{}}
	tail := NewTail(log, "")
	seen := tailSeen(tail)
	resets := 0
	tail.Reset = func() { resets++ }
	if err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		log.commit("t")
	}
	log.prune(2) // pruned while this tail was not looking
	if err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if resets != 1 || len(*seen) != 0 {
		t.Fatalf("after a gap: %d resets, handed over %v; want one reset and nothing (the stores hold it)", resets, *seen)
	}
	log.commit("t")
	if err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(*seen, []int64{5}) || resets != 1 {
		t.Errorf("after the reset: handed over %v with %d resets, want [5] and still 1", *seen, resets)
	}
	if st := tail.State(); st.Resets != 1 {
		t.Errorf("State().Resets = %d, want 1", st.Resets)
	}
}

// TestTailResetsWhenEverythingUnreadWasPruned: pruning deletes through the checkpoint, which
// is exactly where a ceilinged tail stops, so the rows it had not read yet may all be gone with
// nothing left after them (or only rows past the ceiling). That is a gap too: the tail must
// reset at once, not wait for the projector's next message in that partition to show the hole
// (until then the changes in the pruned rows were never handed over).
func TestTailResetsWhenEverythingUnreadWasPruned(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, ceiling string
		after         bool // a message past the ceiling is committed
	}{
		{"ceiling, nothing after", "projector", false},
		{"ceiling, a message past it", "projector", true},
		{"no ceiling", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &memLog{cp: map[string]int64{}}
			tail := NewTail(log, tc.ceiling)
			seen := tailSeen(tail)
			resets := 0
			tail.Reset = func() { resets++ }
			if err := tail.Poll(ctx); err != nil {
				t.Fatal(err)
			}
			log.commit("t")
			log.commit("t")
			log.cp["projector"] = 2 // another process's projector applied both...
			log.prune(2)            // ...and a purge deleted them before this tail's next poll
			if tc.after {
				log.commit("t")
			}
			if err := tail.Poll(ctx); err != nil {
				t.Fatal(err)
			}
			if resets != 1 || len(*seen) != 0 {
				t.Fatalf("after its unread rows were pruned: %d resets, handed over %v; want one reset", resets, *seen)
			}
			log.commit("t")
			log.cp["projector"] = log.last
			if err := tail.Poll(ctx); err != nil {
				t.Fatal(err)
			}
			want := []int64{3, 4}
			if !tc.after {
				want = []int64{3}
			}
			if !slices.Equal(*seen, want) || resets != 1 {
				t.Errorf("after the reset: handed over %v with %d resets, want %v and still 1", *seen, resets, want)
			}
		})
	}
}

// TestTailStateSaysHowFarBehind: Behind runs from the start of the last poll that read
// everything, a failing read keeps it growing and is reported, and a later success resumes
// where the tail was (nothing skipped).
func TestTailStateSaysHowFarBehind(t *testing.T) {
	ctx := context.Background()
	log := &memLog{cp: map[string]int64{}}
	tail := NewTail(log, "")
	seen := tailSeen(tail)
	now := time.Unix(1000, 0)
	tail.now = func() time.Time { return now }
	if st := tail.State(); st.Started {
		t.Fatalf("state before any poll: %+v, want not started", st)
	}
	if err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	log.commit("t")
	boom := errors.New("store down")
	log.fail = boom
	now = now.Add(3 * time.Second)
	if err := tail.Poll(ctx); !errors.Is(err, boom) {
		t.Fatalf("poll with the store failing: %v", err)
	}
	if st := tail.State(); !st.Started || st.Behind != 3*time.Second || !errors.Is(st.Err, boom) {
		t.Errorf("state while failing: %+v, want 3s behind with the error", st)
	}
	log.fail = nil
	if err := tail.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if st := tail.State(); st.Behind != 0 || st.Err != nil || !slices.Equal(*seen, []int64{1}) {
		t.Errorf("after recovering: %+v, handed over %v; want caught up with message 1", st, *seen)
	}
}
