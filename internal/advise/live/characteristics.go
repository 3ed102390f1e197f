package live

import (
	"math"
	"slices"

	"github.com/shardmart/shardmart/internal/advise"
	"github.com/shardmart/shardmart/internal/sharding"
)

// KeyCharacteristics are analyzeShardKey's keyCharacteristics (MongoDB 7.0+), under its
// field names, computed from the $sample, plus the documents missing a key field.
type KeyCharacteristics struct {
	Key             string `json:"key"`
	NumDocsTotal    int64  `json:"numDocsTotal"`
	NumOrphanDocs   *int64 `json:"numOrphanDocs,omitempty"` // sharded collections only, as analyzeShardKey
	AvgDocSizeBytes int64  `json:"avgDocSizeBytes"`
	NumDocsSampled  int64  `json:"numDocsSampled"`
	// IsUnique: the key is the collection's unique shard key, or exactly {_id: 1}; advise
	// reads no other indexes, so a unique secondary index on a candidate is not seen.
	IsUnique          bool               `json:"isUnique"`
	NumDistinctValues int64              `json:"numDistinctValues"`
	MostCommonValues  []ValueFrequency   `json:"mostCommonValues"`
	Monotonicity      MonotonicityFigure `json:"monotonicity"`
	// NumDocsMissingShardKeyField is not an analyzeShardKey field: sampled documents lacking
	// a key field (keyed as null, all in one chunk), scaled to the collection.
	NumDocsMissingShardKeyField int64 `json:"numDocsMissingShardKeyField"`
}

// ValueFrequency is one of the most common key values; frequency is scaled from the sample
// to the collection, as analyzeShardKey does when it samples.
type ValueFrequency struct {
	Value     string `json:"value"`
	Frequency int64  `json:"frequency"`
}

// MonotonicityFigure is analyzeShardKey's monotonicity: the correlation between the key's
// index order and insertion order, and its verdict at the 0.7 threshold.
type MonotonicityFigure struct {
	RecordIDCorrelationCoefficient *float64 `json:"recordIdCorrelationCoefficient,omitempty"`
	Type                           string   `json:"type"` // monotonic, not monotonic, unknown
}

// monotonicThreshold is analyzeShardKeyMonotonicityCorrelationCoefficientThreshold's default.
const monotonicThreshold = 0.7

// Characteristics computes every candidate's KeyCharacteristics over the sample.
func (r *Reading) Characteristics(a *Advice) ([]KeyCharacteristics, error) {
	n := int64(len(r.Docs))
	perSampled := float64(r.NumDocs) / float64(n)
	var out []KeyCharacteristics
	for _, cand := range a.Collection.Candidates {
		kc, missing, err := advise.SampleCharacteristics(a.Workload, a.Collection, cand)
		if err != nil {
			return nil, err
		}
		k := KeyCharacteristics{
			Key:                         cand.Key.String(),
			NumDocsTotal:                r.NumDocs,
			AvgDocSizeBytes:             r.avgSampledDocSize(),
			NumDocsSampled:              kc.SampledDocs,
			IsUnique:                    r.Sharded && r.Unique && slices.Equal(cand.Key, r.Key) || slices.Equal(cand.Key, sharding.Key{{Name: "_id"}}),
			NumDistinctValues:           kc.Distinct,
			NumDocsMissingShardKeyField: int64(math.Round(float64(missing) * perSampled)),
			Monotonicity:                MonotonicityFigure{Type: "unknown"},
		}
		if r.Sharded {
			k.NumOrphanDocs = &r.Orphans
		}
		for _, m := range kc.MostCommon {
			k.MostCommonValues = append(k.MostCommonValues, ValueFrequency{Value: m.Value, Frequency: int64(math.Round(float64(m.Docs) * perSampled))})
		}
		if r.InsertionOrder != "" {
			c := kc.Monotonicity
			k.Monotonicity.RecordIDCorrelationCoefficient = &c
			k.Monotonicity.Type = "not monotonic"
			if math.Abs(c) >= monotonicThreshold {
				k.Monotonicity.Type = "monotonic"
			}
		}
		out = append(out, k)
	}
	return out, nil
}

// avgSampledDocSize is the sampled documents' average BSON size.
func (r *Reading) avgSampledDocSize() int64 {
	if len(r.Docs) == 0 {
		return 0
	}
	var b int64
	for _, d := range r.Docs {
		b += int64(len(d))
	}
	return b / int64(len(r.Docs))
}
