package placement

import (
	"context"
	"slices"
	"testing"

	"github.com/shardmart/shardmart/internal/outbox"
)

// seqOutbox is a partition answering fixed positions.
type seqOutbox struct {
	nilOutbox
	last, cp int64
}

func (o seqOutbox) LastSeq(context.Context) (int64, error)            { return o.last, nil }
func (o seqOutbox) Checkpoint(context.Context, string) (int64, error) { return o.cp, nil }

// partsOutbox is a partitioned outbox without outbox.Positions.
type partsOutbox struct{ nilOutbox }

func (partsOutbox) Partitions() []outbox.Log {
	return []outbox.Log{seqOutbox{last: 5, cp: 2}, seqOutbox{last: 7, cp: 7}}
}

// positionsOutbox answers its positions in one call each.
type positionsOutbox struct{ partsOutbox }

func (positionsOutbox) LastSeqs(context.Context) ([]int64, error) { return []int64{50, 70}, nil }
func (positionsOutbox) Checkpoints(context.Context, string) ([]int64, error) {
	return []int64{20, 70}, nil
}

// TestObservedOutboxKeepsPositions: through the decorator a partitioned outbox still answers
// outbox.Positions, timed as one operation: forwarded when the log has them, else asked of
// each partition.
func TestObservedOutboxKeepsPositions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		log           outbox.Log
		wantLast, cps []int64
	}{
		{"with positions", positionsOutbox{}, []int64{50, 70}, []int64{20, 70}},
		{"partition by partition", partsOutbox{}, []int64{5, 7}, []int64{2, 7}},
	} {
		var calls []call
		pos, ok := observeOutbox(tc.log, recorder(&calls)).(outbox.Positions)
		if !ok {
			t.Fatalf("%s: the observed outbox is not outbox.Positions", tc.name)
		}
		last, err := pos.LastSeqs(ctx)
		if err != nil || !slices.Equal(last, tc.wantLast) {
			t.Errorf("%s: LastSeqs %v, %v; want %v", tc.name, last, err, tc.wantLast)
		}
		cps, err := pos.Checkpoints(ctx, "c")
		if err != nil || !slices.Equal(cps, tc.cps) {
			t.Errorf("%s: Checkpoints %v, %v; want %v", tc.name, cps, err, tc.cps)
		}
		if want := []call{{"b", "outbox.last_seqs"}, {"b", "outbox.checkpoints"}}; !slices.Equal(calls, want) {
			t.Errorf("%s: observed %v, want %v", tc.name, calls, want)
		}
	}
	if _, ok := observeOutbox(nilOutbox{}, recorder(new([]call))).(outbox.Positions); ok {
		t.Error("a plain outbox became outbox.Positions")
	}
}
