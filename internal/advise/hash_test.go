package advise

import (
	"math"
	"testing"

	"github.com/shardmart/shardmart/internal/sharding"
)

// Vectors from MongoDB's own unit test src/mongo/db/hasher_test.cpp
// (BSONElementHasher tests, seed 0), plus the startup self-check in hasher.cpp
// ({check: 42} -> -944302157085130861).
func TestHash64MatchesMongoDBVectors(t *testing.T) {
	oid := func(s string) Value {
		v, err := ObjectIDHex(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	var uuid Value
	uuid.Kind = KindUUID
	for i := range uuid.B {
		uuid.B[i] = byte(i)
	}
	tests := []struct {
		name string
		in   Value
		want int64
	}{
		{"int 42", Int(42), -944302157085130861},
		{"double 42.123 truncates", Double(42.123), -944302157085130861},
		{"int 0", Int(0), 4854801880128277513},
		{"double 0.456", Double(0.456), 4854801880128277513},
		{"NaN is zero", Double(math.NaN()), 4854801880128277513},
		{"int 1", Int(1), 5902408780260971510},
		{"double 1.987", Double(1.987), 5902408780260971510},
		{"int -1", Int(-1), 1140205862565771219},
		{"double -1.789", Double(-1.789), 1140205862565771219},
		{"int32 min", Int(math.MinInt32), 6165898260261354870},
		{"int32 max", Int(math.MaxInt32), 1143184177162245883},
		{"max double clamps", Double(math.MaxFloat64), 921523596458303250},
		{"int64 max", Int(math.MaxInt64), 921523596458303250},
		{"-max double clamps", Double(-math.MaxFloat64), 4532067210535695462},
		{"int64 min", Int(math.MinInt64), 4532067210535695462},
		{"MinKey", Value{Kind: KindMinKey}, 7961148599568647290},
		{"MaxKey", Value{Kind: KindMaxKey}, 5504842513779440750},
		{"string abc", String("abc"), 8478485326885698097},
		{"empty string", String(""), 2049396243249673340},
		{"ObjectId 0102…", oid("010203040506070809101112"), -5588663249627035708},
		{"ObjectId zero", oid("000000000000000000000000"), -4293118519463489418},
		{"true", Bool(true), 6405873908747105701},
		{"false", Bool(false), 6289544573401934092},
		{"date 0x5566778811223344", Value{Kind: KindDate, I: 0x5566778811223344}, 4476222765095560467},
		{"date 0", Value{Kind: KindDate}, -1178696894582842035},
		{"UUID 00..0f", uuid, 6084661258071355978},
	}
	for _, tt := range tests {
		if got := Hash64(tt.in); got != tt.want {
			t.Errorf("%s: Hash64 = %d, want %d", tt.name, got, tt.want)
		}
	}
	if got, want := hashBinData(0, []byte{0, 1, 2, 3, 4, 6}), int64(7252465090394235301); got != want {
		t.Errorf("BinData general: got %d, want %d", got, want)
	}
	if got, want := hashBinData(128, []byte{0, 1, 2, 3, 4, 6}), int64(5736670452907618262); got != want {
		t.Errorf("BinData custom: got %d, want %d", got, want)
	}
}

func TestNullAndMissingHashAlike(t *testing.T) {
	// A document without the field is indexed as null, so guest carts with
	// no user_id and with user_id: null land on the same hashed value.
	if a, b := Hash64(Null()), Hash64(Value{Kind: KindMissing}); a != b {
		t.Errorf("null hash %d != missing hash %d", a, b)
	}
}

func TestKeyEncodingOrder(t *testing.T) {
	oidA, _ := ObjectIDHex("000000000000000000000001")
	oidB, _ := ObjectIDHex("0000000000000000000000ff")
	// Each value must sort strictly before the next, as in MongoDB.
	ordered := []Value{
		{Kind: KindMinKey},
		Null(),
		Double(math.Inf(-1)),
		Int(-5),
		Double(-4.5),
		Int(0),
		Double(0.25),
		Int(1),
		Int(1 << 60),
		String(""),
		String("a"),
		String("a\x00"),
		String("ab"),
		String("b"),
		oidA,
		oidB,
		Bool(false),
		Bool(true),
		{Kind: KindDate, I: -1},
		{Kind: KindDate, I: 5},
		{Kind: KindMaxKey},
	}
	for i := 1; i < len(ordered); i++ {
		a := string(appendKeyPart(nil, ordered[i-1]))
		b := string(appendKeyPart(nil, ordered[i]))
		if a >= b {
			t.Errorf("key(%v) >= key(%v), want <", ordered[i-1], ordered[i])
		}
	}
	if a, b := string(appendKeyPart(nil, Int(3))), string(appendKeyPart(nil, Double(3))); a != b {
		t.Errorf("int 3 and double 3.0 encode differently; MongoDB treats them as equal keys")
	}
}

func TestDecodeKeyRendersBounds(t *testing.T) {
	k := sharding.Key{{Name: "ip"}, {Name: "_id", Kind: sharding.Hashed}}
	enc := appendKeyPart(nil, String("056.000.000.000"))
	enc = appendHashedPart(enc, -42)
	tests := []struct {
		enc  string
		want string
	}{
		{string(enc), `{ip: "056.000.000.000", _id: NumberLong(-42)}`},
		{"", "{ip: MinKey, _id: MinKey}"},
		{string(append(appendKeyPart(nil, Null()), tagMax)), "{ip: null, _id: MaxKey}"},
	}
	for _, tt := range tests {
		if got := decodeKey(k, tt.enc); got != tt.want {
			t.Errorf("decodeKey: got %s, want %s", got, tt.want)
		}
	}
}

func TestSamplerMatchesWeights(t *testing.T) {
	w := []float64{5, 1, 0, 3, 1}
	s := newSampler(w)
	counts := make([]int, len(w))
	const n = 200_000
	for i := 0; i < n; i++ {
		counts[s.pick(unit(mix(99, uint64(i))))]++
	}
	for i, c := range counts {
		want := w[i] / 10
		if got := float64(c) / n; math.Abs(got-want) > 0.01 {
			t.Errorf("bucket %d: got %.3f, want %.3f", i, got, want)
		}
	}
}
