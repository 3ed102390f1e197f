package advise

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

const validHead = `name: t
shards: 2
collections:
  - name: c
    fields:
      _id: objectid
      tags: {gen: array}
      user: {gen: ref, pool: 10}
    operations:
      - {name: ins, type: insert}
`

func TestParseWorkloadErrorsNameLineAndField(t *testing.T) {
	tests := []struct {
		name      string
		yaml      string
		wantLine  int
		wantField string
		wantMsg   string
	}{
		{"bad YAML", "name: t\nshards: 2\n  bad: indent\n", 3, "", "invalid YAML"},
		{"unknown top-level field", "name: t\nshard: 3\n", 2, "shard", "unknown field"},
		{"unknown generator parameter", validHead + "    candidates: [{_id: 1}]\n" + "  - name: d\n    fields:\n      x: {gen: int, min: 1, max: 2, colour: red}\n", 14, "collection d.fields.x.colour", "unknown field"},
		{"key on an array field", validHead + "    candidates:\n      - {tags: 1}\n", 12, "collection c.candidates[0].tags", "MongoDB refuses a shard key on an array field"},
		{"key on an unknown field", validHead + "    candidates:\n      - {nope: hashed}\n", 12, "collection c.candidates[0].nope", "unknown field \"nope\""},
		{"two hashed fields", validHead + "    candidates:\n      - {_id: hashed, user: hashed}\n", 12, "collection c.candidates[0]", "at most one hashed field"},
		{"descending key", validHead + "    candidates:\n      - {_id: -1}\n", 12, "collection c.candidates[0]._id", "want 1 or hashed"},
		{"zone on a missing shard", validHead + "    candidates:\n      - key: {_id: 1}\n        zones: [{name: z, shards: [5], firehose: true}]\n", 13, "collection c.candidates[0].zones[0].shards", "shard 5 does not exist"},
		{"firehose on a hashed key", validHead + "    candidates:\n      - key: {_id: hashed}\n        zones: [{name: z, shards: [0], firehose: true}]\n", 13, "collection c.candidates[0].zones[0].firehose", "range key whose first field ascends"},
		{"filter on unknown field", strings.Replace(validHead, "{name: ins, type: insert}", "{name: q, filter: [email]}", 1) + "    candidates: [{_id: 1}]\n", 10, "collection c.operations[0].filter", "unknown field \"email\""},
		{"bad operation type", strings.Replace(validHead, "type: insert", "type: upsert", 1) + "    candidates: [{_id: 1}]\n", 10, "collection c.operations[0].type", "unknown operation type"},
		{"negative shards", "name: t\nshards: -2\n", 2, "shards", "at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseWorkload([]byte(tt.yaml), "w.yaml", nil)
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("got error %v, want an *InputError", err)
			}
			if ie.Line != tt.wantLine || ie.Field != tt.wantField || !strings.Contains(ie.Msg, tt.wantMsg) {
				t.Errorf("got line %d field %q msg %q, want line %d field %q msg containing %q",
					ie.Line, ie.Field, ie.Msg, tt.wantLine, tt.wantField, tt.wantMsg)
			}
			if !strings.HasPrefix(err.Error(), "w.yaml:") {
				t.Errorf("got %q, want it to start with the file name", err)
			}
		})
	}
}

func TestSampleWorkload(t *testing.T) {
	w, err := LoadWorkload("testdata/carts_sample.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := w.Collections[0]
	if got := len(c.Sample); got != 600 {
		t.Fatalf("sample documents: got %d, want 600", got)
	}
	rs, err := Simulate(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	byUser := result(t, rs, "{user_id: hashed}")
	if len(byUser.Jumbo) != 1 || byUser.Jumbo[0].Key != "{user_id: null}" {
		t.Errorf("jumbo: got %+v, want one {user_id: null} chunk (guest carts in the sample)", byUser.Jumbo)
	}
	if byUser.SampleRepeats {
		t.Errorf("sample repeats: got true, want false (600 inserts for 600 documents)")
	}
}

func TestSampleWithArrayShardKeyIsRefusedWithItsLine(t *testing.T) {
	files := map[string]string{"s.jsonl": "{\"_id\": 1, \"tags\": \"a\"}\n{\"_id\": 2, \"tags\": [\"a\", \"b\"]}\n"}
	open := func(n string) ([]byte, error) {
		if s, ok := files[n]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	y := "collections:\n  - name: c\n    sample: s.jsonl\n    operations: [{type: insert}]\n    candidates: [{tags: 1}]\n"
	_, err := ParseWorkload([]byte(y), "w.yaml", open)
	if err == nil || !strings.Contains(err.Error(), "w.yaml:5") || !strings.Contains(err.Error(), "array in s.jsonl:2") {
		t.Errorf("got %v, want the candidate's line (w.yaml:5) and the sample line holding the array (s.jsonl:2)", err)
	}
	files["s.jsonl"] = "{\"_id\": 1}\n{\"_id\": \n"
	_, err = ParseWorkload([]byte(y), "w.yaml", open)
	if err == nil || !strings.HasPrefix(err.Error(), "s.jsonl:2:") {
		t.Errorf("got %v, want an error at s.jsonl:2", err)
	}
}

func TestScenariosParse(t *testing.T) {
	ss, err := Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ascending", "carts", "firehose", "location", "multihotspot", "orders", "products", "random", "tiers"}
	var got []string
	for _, s := range ss {
		got = append(got, s.Name)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("scenarios: got %v, want %v", got, want)
	}
}

// The example in docs/advise.md must stay a valid workload.
func TestDocsExampleParses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/advise.md")
	if err != nil {
		t.Fatalf("read the documented example: %v", err)
	}
	s := string(doc)
	start := strings.Index(s, "```yaml\n")
	end := strings.Index(s[start+8:], "```")
	if start < 0 || end < 0 {
		t.Fatal("no yaml example in docs/advise.md")
	}
	w, err := ParseWorkload([]byte(s[start+8:start+8+end]), "docs/advise.md", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := w.Collections[0]
	if len(c.Candidates) != 3 || len(c.Candidates[2].Zones) != 2 {
		t.Fatalf("got %d candidates, want 3 with 2 zones on the last", len(c.Candidates))
	}
	if got := c.Candidates[2].Zones[1].Ranges[0].Max[0].Kind; got != KindObjectID {
		t.Errorf("zone bound kind: got %v, want an ObjectId", got)
	}
	w.Ops = 20_000
	if _, err := Simulate(context.Background(), w); err != nil {
		t.Fatal(err)
	}
}

func TestOverlappingZonesAreRefused(t *testing.T) {
	y := `collections:
  - name: c
    fields: {n: seq}
    operations: [{type: insert}]
    candidates:
      - key: {n: 1}
        zones:
          - {name: a, shards: [0], ranges: [{min: {n: 0}, max: {n: 100}}]}
          - {name: b, shards: [1], ranges: [{min: {n: 50}, max: {n: 200}}]}
`
	w, err := ParseWorkload([]byte(y), "w.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Simulate(context.Background(), w)
	if err == nil || !strings.Contains(err.Error(), "zone ranges of a and b overlap") {
		t.Errorf("got %v, want an overlap error", err)
	}
}

func TestSampleDottedKey(t *testing.T) {
	files := map[string]string{"s.jsonl": `{"_id": 1, "customer": {"id": 7, "tier": "gold"}}` + "\n" +
		`{"_id": 2, "customer": {"id": 8, "tier": "gold"}}` + "\n"}
	open := func(n string) ([]byte, error) { return []byte(files[n]), nil }
	y := "collections:\n  - name: c\n    sample: s.jsonl\n    operations: [{type: insert}, {type: find, filter: [customer.id]}]\n    candidates: [{customer.id: hashed}]\n"
	w, err := ParseWorkload([]byte(y), "w.yaml", open)
	if err != nil {
		t.Fatal(err)
	}
	w.Ops = 100
	rs, err := Simulate(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if got := rs[0].Characteristics.Distinct; got != 2 {
		t.Errorf("distinct customer.id values: got %d, want 2", got)
	}
}
