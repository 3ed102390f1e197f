package mongocollect

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestCollStatsOwnedSubtractsOrphans(t *testing.T) {
	tests := []struct {
		st          collStats
		bytes, docs float64
	}{
		{collStats{Count: 100, Size: 10_000, Orphans: 25}, 7_500, 75},
		{collStats{Count: 100, Size: 10_000}, 10_000, 100},
		{collStats{}, 0, 0},
		{collStats{Count: 10, Size: 1_000, Orphans: 10}, 0, 0},
	}
	for _, tt := range tests {
		if b, d := tt.st.owned(); b != tt.bytes || d != tt.docs {
			t.Errorf("%+v: got %g bytes %g docs, want %g and %g", tt.st, b, d, tt.bytes, tt.docs)
		}
	}
}

func TestCountChunkMovesCountsAFailureOnce(t *testing.T) {
	ev := func(what, from, to string, min int32, note, errmsg string) changeEvent {
		var e changeEvent
		e.What, e.NS = what, "app.items"
		e.Details.From, e.Details.To, e.Details.Note, e.Details.Errmsg = from, to, note, errmsg
		_, raw, _ := bson.MarshalValue(bson.D{{Key: "k", Value: min}})
		e.Details.Min = bson.RawValue{Type: bson.TypeEmbeddedDocument, Value: raw}
		return e
	}
	got := countChunkMoves([]changeEvent{
		ev("moveChunk.commit", "sh0", "sh1", 1, "", ""),
		ev("moveChunk.from", "sh0", "sh1", 1, "success", ""), // the same committed move: not counted again
		ev("moveChunk.commit", "sh0", "sh1", 2, "", ""),
		ev("moveChunk.error", "sh0", "sh1", 3, "", "boom"), // one failure, written twice
		ev("moveChunk.from", "sh0", "sh1", 3, "aborted", "boom"),
		ev("moveChunk.from", "sh1", "sh0", 4, "aborted", "early"), // failed before moveChunk.error
		ev("moveChunk.error", "sh1", "sh0", 5, "", "x"),           // failed, no moveChunk.from
	})
	want := map[moveKey]int{
		{from: "sh0", to: "sh1", ns: "app.items", result: "committed"}: 2,
		{from: "sh0", to: "sh1", ns: "app.items", result: "failed"}:    1,
		{from: "sh1", to: "sh0", ns: "app.items", result: "failed"}:    2,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%+v: got %d, want %d", k, got[k], n)
		}
	}
}
