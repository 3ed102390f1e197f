// Package advise is the shard-key advisor: it simulates a MongoDB sharded cluster
// (hashed keys, chunk splits, jumbo chunks, the 6.0.3+ balancer, zones, firehose)
// for a workload and candidate shard keys, and reports the effects as numbers.
package advise

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/shardmart/shardmart/internal/sharding"
)

// Kind is the BSON type family of a Value, as far as shard keys care.
type Kind uint8

// Kinds a generated or sampled field value can have.
const (
	KindMissing Kind = iota // field absent: MongoDB keys it as null
	KindNull
	KindInt
	KindDouble
	KindString
	KindObjectID
	KindBool
	KindDate // milliseconds since the Unix epoch
	KindUUID // BinData subtype 4
	KindArray
	KindObject
	KindMinKey
	KindMaxKey
)

// Value is one field value. It is a plain struct, not an interface, so the
// simulation loop generates values without allocating.
type Value struct {
	Kind Kind
	I    int64    // Int, Date (ms), Bool (0/1)
	F    float64  // Double
	S    string   // String
	B    [16]byte // ObjectID (first 12 bytes) or UUID
}

// Constructors keep scenario and test code short.
func Int(i int64) Value      { return Value{Kind: KindInt, I: i} }
func Double(f float64) Value { return Value{Kind: KindDouble, F: f} }
func String(s string) Value  { return Value{Kind: KindString, S: s} }
func Bool(b bool) Value {
	if b {
		return Value{Kind: KindBool, I: 1}
	}
	return Value{Kind: KindBool}
}
func Null() Value { return Value{Kind: KindNull} }

// Date is a BSON date at ms precision.
func Date(t time.Time) Value { return Value{Kind: KindDate, I: t.UnixMilli()} }

// ObjectID builds a value from 12 raw bytes.
func ObjectID(b [12]byte) Value {
	v := Value{Kind: KindObjectID}
	copy(v.B[:], b[:])
	return v
}

// ObjectIDHex parses a 24-digit hex ObjectId.
func ObjectIDHex(s string) (Value, error) {
	var b [12]byte
	if len(s) != 24 {
		return Value{}, fmt.Errorf("objectid %q: want 24 hex digits", s)
	}
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return Value{}, fmt.Errorf("objectid %q: %w", s, err)
	}
	return ObjectID(b), nil
}

// canonicalType is MongoDB's canonicalizeBSONType: the sort class of a type,
// also fed into the hashed-index function.
func (v Value) canonicalType() int32 {
	switch v.Kind {
	case KindMinKey:
		return -1
	case KindMissing, KindNull:
		return 5
	case KindInt, KindDouble:
		return 10
	case KindString:
		return 15
	case KindObject:
		return 20
	case KindArray:
		return 25
	case KindUUID:
		return 30
	case KindObjectID:
		return 35
	case KindBool:
		return 40
	case KindDate:
		return 45
	case KindMaxKey:
		return 127
	}
	return 0
}

// String renders the value the way mongosh would, for reports.
func (v Value) String() string {
	switch v.Kind {
	case KindMissing, KindNull:
		return "null"
	case KindInt:
		return strconv.FormatInt(v.I, 10)
	case KindDouble:
		return strconv.FormatFloat(v.F, 'g', -1, 64)
	case KindString:
		return strconv.Quote(v.S)
	case KindObjectID:
		return "ObjectId(\"" + hex.EncodeToString(v.B[:12]) + "\")"
	case KindBool:
		return strconv.FormatBool(v.I != 0)
	case KindDate:
		return time.UnixMilli(v.I).UTC().Format(time.RFC3339)
	case KindUUID:
		return "UUID(\"" + hex.EncodeToString(v.B[:]) + "\")"
	case KindArray:
		return "[…]"
	case KindObject:
		return "{…}"
	case KindMinKey:
		return "MinKey"
	case KindMaxKey:
		return "MaxKey"
	}
	return "?"
}

// Key encoding. Chunk bounds and document keys are byte strings whose
// lexicographic order is MongoDB's shard-key order, so chunk lookup is a plain
// binary search over strings. Each field part starts with a tag derived from
// the canonical type (+2 so MinKey gets 1 and no tag is 0).
const (
	tagMin = 1
	tagMax = 129
)

func tag(v Value) byte { return byte(v.canonicalType() + 2) }

// appendKeyPart appends the order-preserving encoding of v.
func appendKeyPart(dst []byte, v Value) []byte {
	dst = append(dst, tag(v))
	switch v.Kind {
	case KindInt:
		dst = appendNumber(dst, v.I, 0)
	case KindDouble:
		dst = appendDouble(dst, v.F)
	case KindString:
		// 0x00 is escaped as 00 FF and the string ends with 00 01, so a prefix
		// sorts before its extensions, as in BSON string comparison.
		for i := 0; i < len(v.S); i++ {
			if v.S[i] == 0 {
				dst = append(dst, 0, 0xFF)
				continue
			}
			dst = append(dst, v.S[i])
		}
		dst = append(dst, 0, 1)
	case KindObjectID:
		dst = append(dst, v.B[:12]...)
	case KindUUID:
		// BinData orders by length, then subtype, then bytes; all ours are 16/4.
		dst = append(dst, 0, 0, 0, 16, 4)
		dst = append(dst, v.B[:]...)
	case KindBool:
		dst = append(dst, byte(v.I))
	case KindDate:
		dst = binary.BigEndian.AppendUint64(dst, uint64(v.I)^(1<<63))
	}
	return dst
}

// appendHashedPart appends a hashed field: the index stores the hash as a
// NumberLong, so it sorts among numbers.
func appendHashedPart(dst []byte, h int64) []byte {
	dst = append(dst, byte(10+2))
	return appendNumber(dst, h, 0)
}

// appendNumber writes an integer part and a fraction in [0,1): 16 bytes that
// order ints and doubles together exactly within the int64 range.
func appendNumber(dst []byte, whole int64, frac float64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(whole)^(1<<63))
	return binary.BigEndian.AppendUint64(dst, math.Float64bits(frac))
}

func appendDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		// MongoDB sorts NaN below every other number.
		return appendNumber(dst, math.MinInt64, 0)
	case f >= math.MaxInt64:
		return appendNumber(dst, math.MaxInt64, 0)
	case f < math.MinInt64:
		return appendNumber(dst, math.MinInt64, 0)
	}
	w := math.Floor(f)
	return appendNumber(dst, int64(w), f-w)
}

// decodeKey renders an encoded shard-key value or chunk bound for reports,
// e.g. {user_id: NumberLong(-4611686018427387904)} or {ip: "056.000.000.000", _id: MinKey}.
func decodeKey(k sharding.Key, enc string) string {
	if enc == "" {
		enc = strings.Repeat(string(rune(tagMin)), len(k))
	}
	b := []byte(enc)
	parts := make([]string, 0, len(k))
	for _, f := range k {
		var s string
		s, b = decodePart(b, f.Kind == sharding.Hashed)
		parts = append(parts, f.Name+": "+s)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func decodePart(b []byte, hashed bool) (string, []byte) {
	if len(b) == 0 {
		return "?", b
	}
	t, b := b[0], b[1:]
	need := func(n int) bool { return len(b) >= n }
	switch t {
	case tagMin:
		return "MinKey", b
	case tagMax:
		return "MaxKey", b
	case 5 + 2:
		return "null", b
	case 10 + 2:
		if !need(16) {
			return "?", nil
		}
		whole := int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
		frac := math.Float64frombits(binary.BigEndian.Uint64(b[8:]))
		b = b[16:]
		if hashed {
			return "NumberLong(" + strconv.FormatInt(whole, 10) + ")", b
		}
		if frac == 0 {
			return strconv.FormatInt(whole, 10), b
		}
		return strconv.FormatFloat(float64(whole)+frac, 'g', -1, 64), b
	case 15 + 2:
		var s []byte
		for i := 0; i+1 < len(b); i++ {
			if b[i] != 0 {
				s = append(s, b[i])
				continue
			}
			if b[i+1] == 0xFF {
				s = append(s, 0)
				i++
				continue
			}
			return strconv.Quote(string(s)), b[i+2:]
		}
		return "?", nil
	case 30 + 2:
		if !need(21) {
			return "?", nil
		}
		return "UUID(\"" + hex.EncodeToString(b[5:21]) + "\")", b[21:]
	case 35 + 2:
		if !need(12) {
			return "?", nil
		}
		return "ObjectId(\"" + hex.EncodeToString(b[:12]) + "\")", b[12:]
	case 40 + 2:
		if !need(1) {
			return "?", nil
		}
		return strconv.FormatBool(b[0] != 0), b[1:]
	case 45 + 2:
		if !need(8) {
			return "?", nil
		}
		ms := int64(binary.BigEndian.Uint64(b) ^ (1 << 63))
		return time.UnixMilli(ms).UTC().Format(time.RFC3339), b[8:]
	}
	return "?", nil
}
