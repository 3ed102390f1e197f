package advise

import (
	"encoding/json"
	"time"

	"github.com/shardmart/shardmart/internal/sharding"
)

// Result is what one candidate key did under the workload.
type Result struct {
	Collection string
	Key        sharding.Key
	Zones      []string
	Shards     int
	Ticks      int
	TickLength time.Duration
	ChunkSize  int64

	// Per tick and shard: data bytes at the end of the tick, writes during it.
	Data   [][]int64
	Writes [][]int64

	Ops                 int64
	Inserts             int64
	TopChunkInserts     int64 // inserts that landed in the chunk holding MaxKey
	FirstMoveTick       int   // -1: the balancer never moved anything
	InsertsBeforeMove   []int64
	ChunkMoves          int
	MovedBytes          int64
	Chunks              int
	ChunksPerShard      []int
	Jumbo               []JumboChunk
	OpStats             []OpStat
	Characteristics     KeyCharacteristics
	SampleRepeats       bool // more inserts than sample documents: the sample was replayed
	ZoneViolationsAtEnd int
	Moves               []ChunkMove // the first chunk moves, at most 10000
}

// ChunkMove is one range the balancer moved.
type ChunkMove struct {
	Tick     int
	From, To int
	Min      string // the range's lower bound, rendered
	Bytes    int64
}

// JumboChunk is a chunk that holds one key value and exceeds the chunk size.
type JumboChunk struct {
	Key   string // the key value, rendered
	Bytes int64
	Shard int
}

// OpStat classifies one declared operation the way analyzeShardKey's
// readWriteDistribution does: single-shard, multi-shard (targeted by the
// key but spanning shards) and scatter-gather (no usable key predicate).
type OpStat struct {
	Name          string
	Type          OpType
	Count         int64
	SingleShard   int64
	MultiShard    int64
	ScatterGather int64
	ShardsHit     int64 // sum over operations, for the mean
}

// KeyCharacteristics are analyzeShardKey-style figures over the inserted
// documents (evenly sampled, at most characteristicsSample documents).
type KeyCharacteristics struct {
	SampledDocs int64
	Distinct    int64
	MostCommon  []ValueFreq
	// Correlation between shard-key index order and insertion order;
	// |r| >= 0.7 is "monotonic" (analyzeShardKey's default threshold).
	Monotonicity float64
	Monotonic    bool
}

// ValueFreq is one frequent shard-key value.
type ValueFreq struct {
	Value string
	Docs  int64
}

// MarshalJSON writes Key in the --json shape of before the advisor took
// sharding.Key, {"Fields": [{"Name", "Hashed"}]}, so readers' scripts keep
// working; the other fields are as declared.
func (r *Result) MarshalJSON() ([]byte, error) {
	type keyField struct {
		Name   string
		Hashed bool
	}
	var key struct{ Fields []keyField }
	for _, f := range r.Key {
		key.Fields = append(key.Fields, keyField{f.Name, f.Kind == sharding.Hashed})
	}
	type fields Result // without this method
	// Collection and Key, declared first, shadow the embedded ones and keep
	// the field order.
	return json.Marshal(struct {
		Collection string
		Key        any
		*fields
	}{r.Collection, key, (*fields)(r)})
}
