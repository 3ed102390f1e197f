package advise

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/shardmart/shardmart/internal/sharding"
)

// specCollection is the spec `shardmart mongo apply` would use for one variant.
func specCollection(t *testing.T, name, variant string) sharding.Collection {
	t.Helper()
	spec, err := sharding.NewSpec(sharding.Options{Variants: map[string]string{name: variant}})
	if err != nil {
		t.Fatal(err)
	}
	sc, ok := spec.Collection(name)
	if !ok {
		t.Fatalf("spec has no collection %s", name)
	}
	return sc
}

func TestEverySpecVariantSimulatesOnItsScenario(t *testing.T) {
	for _, name := range []string{"orders", "products", "carts"} {
		w, err := LoadScenario(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Ops = 5000
		c := w.Collections[0]
		for _, variant := range sharding.Variants()[name] {
			sc := specCollection(t, name, variant)
			cand, err := SpecCandidate(c, sc)
			if err != nil {
				t.Fatalf("%s %s: %v", name, variant, err)
			}
			r, err := SimulateCandidate(context.Background(), w, c, cand)
			if err != nil {
				t.Fatalf("%s %s: %v", name, variant, err)
			}
			if !reflect.DeepEqual(r.Key, sc.Key) || r.Inserts == 0 {
				t.Errorf("%s %s: got key %s and %d inserts, want the spec's key %s and inserts", name, variant, r.Key, r.Inserts, sc.Key)
			}
		}
	}
}

// One model: the spec's key and the same key written in the workload file
// give the same run.
func TestSpecKeyRunsLikeTheWorkloadKey(t *testing.T) {
	w, err := LoadScenario("carts")
	if err != nil {
		t.Fatal(err)
	}
	w.Ops = 5000
	c := w.Collections[0]
	cand, err := SpecCandidate(c, specCollection(t, "carts", "user_id_hashed"))
	if err != nil {
		t.Fatal(err)
	}
	fromSpec, err := SimulateCandidate(context.Background(), w, c, cand)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := SimulateCandidate(context.Background(), w, c, c.Candidates[1])
	if err != nil {
		t.Fatal(err)
	}
	if c.Candidates[1].String() != "{user_id: hashed}" || !reflect.DeepEqual(fromSpec, fromFile) {
		t.Errorf("spec user_id_hashed and workload %s: got different results", c.Candidates[1])
	}
}

func TestSpecCandidateAppliesShardKeyRules(t *testing.T) {
	w, err := ParseWorkload([]byte(`
name: t
collections:
  - name: d
    fields: {a: seq, b: seq, tags: array}
    operations: [{type: insert}]
    candidates: [{a: 1}]
`), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	c := w.Collections[0]
	asc := func(n string) sharding.KeyField { return sharding.KeyField{Name: n} }
	tests := []struct {
		key  sharding.Key
		want string
	}{
		{sharding.Key{asc("a"), asc("missing")}, `unknown field "missing"`},
		{sharding.Key{asc("tags")}, "holds arrays"},
		{sharding.Key{{Name: "a", Kind: sharding.Descending}}, "descending"},
		{sharding.Key{{Name: "a", Kind: sharding.Hashed}, {Name: "b", Kind: sharding.Hashed}}, "at most one hashed field"},
		{nil, "empty shard key"},
	}
	for _, tt := range tests {
		_, err := SpecCandidate(c, sharding.Collection{Name: "d", Variant: "v", Key: tt.key})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error containing %q", keyPattern(tt.key), err, tt.want)
		}
		// The simulator refuses the same keys however the candidate was made.
		if _, err := SimulateCandidate(context.Background(), w, c, Candidate{Key: tt.key}); err == nil {
			t.Errorf("%s: simulated, want the same refusal", keyPattern(tt.key))
		}
	}
}
