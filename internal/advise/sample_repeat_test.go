package advise

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// A sample stretched with sample_repeat keeps its insertion order: 100 ascending ObjectIds
// standing for 20 inserts each send every insert into the max chunk, as the real collection
// did; cycling through them (no sample_repeat) restarts at the lowest _id 19 times.
func TestSampleRepeatKeepsInsertionOrder(t *testing.T) {
	var lines []string
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 100 {
		id := bson.NewObjectIDFromTimestamp(t0.Add(time.Duration(i) * time.Minute))
		lines = append(lines, fmt.Sprintf(`{"_id": {"$oid": %q}, "pad": %q}`, id.Hex(), strings.Repeat("x", 900)))
	}
	sample := []byte(strings.Join(lines, "\n"))
	run := func(repeat string) *Result {
		t.Helper()
		w, err := ParseWorkload([]byte(`
shards: 3
chunk_size: 64KiB
ops: 2000
collections:
  - name: events
    sample: s.jsonl`+repeat+`
    operations: [{type: insert}]
    candidates: [{_id: 1}]
`), "w.yaml", func(string) ([]byte, error) { return sample, nil })
		if err != nil {
			t.Fatal(err)
		}
		r, err := SimulateCandidate(context.Background(), w, w.Collections[0], w.Collections[0].Candidates[0])
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	stretched, cycled := run("\n    sample_repeat: 20"), run("")
	if stretched.TopChunkInserts != stretched.Inserts || stretched.SampleRepeats {
		t.Errorf("stretched: %d of %d inserts into the max chunk (replayed note %t), want all and no note", stretched.TopChunkInserts, stretched.Inserts, stretched.SampleRepeats)
	}
	if cycled.TopChunkInserts*2 > cycled.Inserts || !cycled.SampleRepeats {
		t.Errorf("cycled: %d of %d inserts into the max chunk (replayed note %t), want under half and the note", cycled.TopChunkInserts, cycled.Inserts, cycled.SampleRepeats)
	}
	if _, err := ParseWorkload([]byte("collections:\n  - name: x\n    fields: {_id: objectid}\n    sample_repeat: 2\n    operations: [{type: insert}]\n    candidates: [{_id: 1}]\n"), "w.yaml", nil); err == nil || !strings.Contains(err.Error(), "sample_repeat: only with sample") {
		t.Errorf("sample_repeat with generators: got %v, want it refused", err)
	}
}
