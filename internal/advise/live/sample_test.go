package live

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/sharding"
)

// events makes n documents inserted one second apart: ObjectId _ids (or int _ids), a field
// growing with insertion (seq), one random (rnd), padded to pad bytes, in shuffled order as
// $sample returns them.
func events(n int, oids bool, pad int) []bson.Raw {
	rng := rand.New(rand.NewPCG(5, 5))
	from := time.Now().Add(-time.Hour)
	out := make([]bson.Raw, n)
	for i := range out {
		var id any = bson.NewObjectIDFromTimestamp(from.Add(time.Duration(i) * time.Second))
		if !oids {
			id = int64(rng.Uint32())
		}
		raw, err := bson.Marshal(bson.D{{Key: "_id", Value: id}, {Key: "seq", Value: int64(i)},
			{Key: "rnd", Value: rng.Int64()}, {Key: "pad", Value: strings.Repeat("x", pad)}})
		if err != nil {
			panic(err)
		}
		out[i] = raw
	}
	rng.Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func reading(docs []bson.Raw, numDocs int64) *Reading {
	r := &Reading{NS: "shop.events", NumDocs: numDocs, ChunkSize: 1 << 20}
	r.Docs, r.InsertionOrder = insertionOrder(dedupe(docs))
	r.DataSize = r.avgSampledDocSize() * numDocs
	return r
}

func monotonicity(t *testing.T, r *Reading, keys ...sharding.Key) map[string]MonotonicityFigure {
	t.Helper()
	a, err := r.Workload(Model{Candidates: keys})
	if err != nil {
		t.Fatal(err)
	}
	kcs, err := r.Characteristics(a)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]MonotonicityFigure{}
	for _, k := range kcs {
		out[k.Key] = k.Monotonicity
	}
	return out
}

var (
	seqKey    = sharding.Key{{Name: "seq"}}
	rndKey    = sharding.Key{{Name: "rnd"}}
	idHashed  = sharding.Key{{Name: "_id", Kind: sharding.Hashed}}
	idKey     = sharding.Key{{Name: "_id"}}
	testedKey = []sharding.Key{seqKey, rndKey, idHashed, idKey}
)

// With ObjectId _ids the sample is put in _id order, so {_id: 1} is monotonic by
// construction; the figure tells other keys apart: one growing with insertion is monotonic,
// a random one and a hashed _id are not.
func TestMonotonicityAgainstObjectIdOrder(t *testing.T) {
	got := monotonicity(t, reading(events(400, true, 100), 4000), testedKey...)
	for _, tt := range []struct {
		key       sharding.Key
		monotonic bool
	}{{seqKey, true}, {idKey, true}, {rndKey, false}, {idHashed, false}} {
		m := got[tt.key.String()]
		c := m.RecordIDCorrelationCoefficient
		switch {
		case c == nil:
			t.Errorf("%s: no coefficient (%+v)", tt.key, m)
		case tt.monotonic && (m.Type != "monotonic" || *c < 0.99):
			t.Errorf("%s: %s %.3f, want monotonic ≥ 0.99", tt.key, m.Type, *c)
		case !tt.monotonic && (m.Type != "not monotonic" || *c > 0.3 || *c < -0.3):
			t.Errorf("%s: %s %.3f, want not monotonic, |r| ≤ 0.3", tt.key, m.Type, *c)
		}
	}
}

// Without ObjectId _ids the insertion order is unknown and so is every key's monotonicity,
// the one growing with insertion included.
func TestMonotonicityUnknownWithoutObjectIds(t *testing.T) {
	r := reading(events(400, false, 100), 4000)
	if r.InsertionOrder != "" {
		t.Errorf("insertion order %q from int _ids, want unknown", r.InsertionOrder)
	}
	for k, m := range monotonicity(t, r, testedKey...) {
		if m.Type != "unknown" || m.RecordIDCorrelationCoefficient != nil {
			t.Errorf("%s: %+v, want unknown without a coefficient", k, m)
		}
	}
}

func TestSampleDeduplicatedByID(t *testing.T) {
	docs := events(50, true, 10)
	twice := append(append([]bson.Raw{}, docs...), docs[:20]...)
	if got := dedupe(twice); len(got) != 50 {
		t.Errorf("50 documents, 20 of them twice: %d after dedupe, want 50", len(got))
	}
}

func TestSampleCap(t *testing.T) {
	tests := []struct {
		numDocs, dataSize int64
		asked, want       int
	}{
		{12000, 12000 << 10, 1000, 600},    // 5 % of the collection
		{100000, 100000 << 10, 1000, 1000}, // as asked
		{100000, 100000 << 20, 1000, 256},  // 1 MiB documents: 256 MiB
		{100, 100 << 10, 1000, 5},          // the smallest collection advised
	}
	for _, tt := range tests {
		r := &Reading{NumDocs: tt.numDocs, DataSize: tt.dataSize}
		if got := r.sampleCap(tt.asked); got != tt.want {
			t.Errorf("%d documents of %d bytes, %d asked: %d sampled, want %d", tt.numDocs, tt.dataSize/tt.numDocs, tt.asked, got, tt.want)
		}
	}
}

// A sampled document standing for a run of inserts bigger than an eighth of a chunk is
// refused, naming the sample that would do.
func TestRepeatOverAChunkRefused(t *testing.T) {
	r := reading(events(100, true, 4000), 10000) // 100 × ~4 KB each standing for 100: ~400 KB
	_, err := r.Workload(Model{Candidates: []sharding.Key{seqKey}})
	var ref *Refusal
	if !errors.As(err, &ref) || !strings.Contains(ref.Msg, "give --sample 310 or more") {
		t.Fatalf("got %v, want a refusal asking for --sample 310 or more (10 000 × ~4 KB × 8 / 1 MiB)", err)
	}
	r = reading(events(400, true, 4000), 10000)
	if _, err := r.Workload(Model{Candidates: []sharding.Key{seqKey}}); err != nil {
		t.Errorf("400 sampled of 10 000: %v", err)
	}
}
