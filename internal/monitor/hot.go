package monitor

// The hot-shard decision, written once: --once uses it, and the Prometheus rules (written
// separately) use the same thresholds. A shard is compared with the mean of the
// OTHER shards (a shard inflates a mean it is part of) and require an absolute floor (tiny
// collections page all night otherwise). Since MongoDB 6.0.3 the balancer evens data size,
// not chunk counts, so chunk skew is only a secondary note.
const (
	// HotDataRatio: a shard is hot at data ≥ 1.5 × the other shards' mean (+50 %).
	HotDataRatio = 1.5
	// ChunkSkewRatio: chunk-skew at chunks ≥ 2 × the other shards' mean.
	ChunkSkewRatio = 2.0
)

// Share is one shard's part of one collection.
type Share struct {
	Shard     string
	DataBytes float64 // orphans excluded
	Chunks    float64
}

// Verdict is the decision for one shard of one collection.
type Verdict struct {
	Share
	Fraction         float64 // of the collection's data on all shards (0 when it holds none)
	OthersDataMean   float64
	OthersChunksMean float64
	Hot              bool // data ≥ HotDataRatio × OthersDataMean, ≥ the floor, and > 0
	ChunkSkew        bool // chunks ≥ ChunkSkewRatio × OthersChunksMean and > 0
}

// Judge decides, for each shard of one collection, whether it is hot. A single-shard
// collection is never hot: there is no other shard to compare with or move data to.
func Judge(shares []Share, floorBytes float64) []Verdict {
	var data, chunks float64
	for _, s := range shares {
		data += s.DataBytes
		chunks += s.Chunks
	}
	out := make([]Verdict, len(shares))
	for i, s := range shares {
		v := Verdict{Share: s}
		if data > 0 {
			v.Fraction = s.DataBytes / data
		}
		if others := float64(len(shares) - 1); others > 0 {
			v.OthersDataMean = (data - s.DataBytes) / others
			v.OthersChunksMean = (chunks - s.Chunks) / others
			v.Hot = s.DataBytes > 0 && s.DataBytes >= floorBytes && s.DataBytes >= HotDataRatio*v.OthersDataMean
			v.ChunkSkew = s.Chunks > 0 && s.Chunks >= ChunkSkewRatio*v.OthersChunksMean
		}
		out[i] = v
	}
	return out
}
