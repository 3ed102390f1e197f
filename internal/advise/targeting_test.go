package advise

import (
	"testing"

	"github.com/shardmart/shardmart/internal/sharding"
)

func TestPlanOpTargeting(t *testing.T) {
	c := &Collection{fieldIdx: map[string]int{"a": 0, "b": 1, "c": 2}}
	for _, n := range []string{"a", "b", "c"} {
		c.Fields = append(c.Fields, &Field{Name: n})
	}
	rangeKey := sharding.Key{{Name: "a"}, {Name: "b"}}
	hashedKey := sharding.Key{{Name: "a", Kind: sharding.Hashed}}
	tests := []struct {
		name          string
		key           sharding.Key
		op            Operation
		wantFull      bool
		wantPrefix    int
		wantRange     bool
		wantBroadcast bool
	}{
		{"whole key", rangeKey, Operation{Filter: []string{"b", "a"}}, true, 2, false, false},
		{"key prefix", rangeKey, Operation{Filter: []string{"a", "c"}}, false, 1, false, false},
		{"prefix and range on next field", rangeKey, Operation{Filter: []string{"a"}, Range: &RangeFilter{Field: "b", Span: 5}}, false, 1, true, false},
		{"range on first field", rangeKey, Operation{Range: &RangeFilter{Field: "a", Span: 5}}, false, 0, true, false},
		{"second field only", rangeKey, Operation{Filter: []string{"b"}}, false, 0, false, true},
		{"hashed equality", hashedKey, Operation{Filter: []string{"a"}}, true, 1, false, false},
		{"range on hashed field", hashedKey, Operation{Range: &RangeFilter{Field: "a", Span: 5}}, false, 0, false, true},
	}
	for _, tt := range tests {
		p := planOp(&tt.op, tt.key, c)
		if p.full != tt.wantFull || p.eqPrefix != tt.wantPrefix || p.rangeOn != tt.wantRange || p.broadcast != tt.wantBroadcast {
			t.Errorf("%s: got full=%v prefix=%d range=%v broadcast=%v, want %v %d %v %v", tt.name,
				p.full, p.eqPrefix, p.rangeOn, p.broadcast, tt.wantFull, tt.wantPrefix, tt.wantRange, tt.wantBroadcast)
		}
	}
}
