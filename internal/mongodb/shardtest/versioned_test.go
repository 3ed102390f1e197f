package shardtest

import (
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// A shard's version is the highest chunk version among the chunks it owns, with the
// collection's epoch and timestamp; a shard owning none is at 0|0.
func TestShardVersionIsTheHighestChunkVersionOfTheShard(t *testing.T) {
	epoch, ts := bson.NewObjectID(), bson.Timestamp{T: 1700000000, I: 3}
	info := CollectionInfo{Epoch: epoch, Timestamp: ts, Chunks: []Chunk{
		{Shard: "a", Lastmod: bson.Timestamp{T: 2, I: 1}},
		{Shard: "b", Lastmod: bson.Timestamp{T: 3, I: 0}},
		{Shard: "a", Lastmod: bson.Timestamp{T: 2, I: 4}},
		{Shard: "a", Lastmod: bson.Timestamp{T: 1, I: 9}},
	}}
	for shard, want := range map[string]bson.Timestamp{"a": {T: 2, I: 4}, "b": {T: 3}, "c": {}} {
		got := info.ShardVersion(shard)
		wantDoc := bson.D{{Key: "e", Value: epoch}, {Key: "t", Value: ts}, {Key: "v", Value: want}}
		if a, b := bson.Raw(mustMarshal(t, got)).String(), bson.Raw(mustMarshal(t, wantDoc)).String(); a != b {
			t.Errorf("shard %s: version %s, want %s", shard, a, b)
		}
	}
}

func mustMarshal(t *testing.T, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
