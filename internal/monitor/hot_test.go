package monitor

import "testing"

func TestJudge(t *testing.T) {
	const mib = 1 << 20
	floor := 64.0 * mib
	tests := []struct {
		name      string
		shares    []Share
		hot, skew []bool
	}{
		{"one shard 1.5× the mean of the other two, over the floor",
			[]Share{{"a", 150 * mib, 4}, {"b", 100 * mib, 4}, {"c", 100 * mib, 4}}, []bool{true, false, false}, []bool{false, false, false}},
		{"just under 1.5× the others' mean (a mean that included itself would hide it sooner)",
			[]Share{{"a", 149 * mib, 2}, {"b", 100 * mib, 2}, {"c", 100 * mib, 2}}, []bool{false, false, false}, []bool{false, false, false}},
		{"3× the others but under the floor: a tiny collection pages nobody",
			[]Share{{"a", 30 * mib, 1}, {"b", 10 * mib, 1}}, []bool{false, false}, []bool{false, false}},
		{"all data on one shard, over the floor; chunk skew noted, not the signal",
			[]Share{{"a", 100 * mib, 1}, {"b", 0, 0}}, []bool{true, false}, []bool{true, false}},
		{"chunk skew without data skew (the 6.0.3+ balancer evens size, not counts)",
			[]Share{{"a", 100 * mib, 40}, {"b", 100 * mib, 10}}, []bool{false, false}, []bool{true, false}},
		{"single-shard cluster: nothing to compare with",
			[]Share{{"a", 500 * mib, 9}}, []bool{false}, []bool{false}},
		{"zero data everywhere",
			[]Share{{"a", 0, 0}, {"b", 0, 0}}, []bool{false, false}, []bool{false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Judge(tt.shares, floor)
			for i, v := range got {
				if v.Hot != tt.hot[i] || v.ChunkSkew != tt.skew[i] {
					t.Errorf("%s: got hot=%t skew=%t (others' mean %.0f B, %.1f chunks), want hot=%t skew=%t",
						v.Shard, v.Hot, v.ChunkSkew, v.OthersDataMean, v.OthersChunksMean, tt.hot[i], tt.skew[i])
				}
			}
		})
	}
	// With a zero floor, zero data is still not hot.
	if v := Judge([]Share{{"a", 0, 0}, {"b", 0, 0}}, 0); v[0].Hot {
		t.Error("zero data with a zero floor: got hot, want not")
	}
	if v := Judge([]Share{{"a", 3, 0}, {"b", 1, 0}}, 0); v[0].Fraction != 0.75 || v[0].OthersDataMean != 1 {
		t.Errorf("fraction %g and others' mean %g, want 0.75 and 1", v[0].Fraction, v[0].OthersDataMean)
	}
}
