package advise

import (
	"crypto/md5"
	"encoding/binary"
	"math"
)

// Hash64 is MongoDB's hashed-index function (BSONElementHasher::hash64 in
// src/mongo/db/hasher.cpp, seed 0): MD5 over the little-endian int32 seed, the
// little-endian int32 canonical type and the element's value bytes, with
// numbers squashed to int64 first; the result is the digest's first 8 bytes
// read as a little-endian int64. The field name is not hashed.
// Objects and arrays are not supported (MongoDB refuses arrays as shard keys).
func Hash64(v Value) int64 {
	var stack [64]byte
	buf := stack[:0]
	buf = binary.LittleEndian.AppendUint32(buf, 0) // seed
	buf = binary.LittleEndian.AppendUint32(buf, uint32(v.canonicalType()))
	switch v.Kind {
	case KindInt:
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v.I))
	case KindDouble:
		buf = binary.LittleEndian.AppendUint64(buf, uint64(safeNumberLongForHash(v.F)))
	case KindString:
		// BSON string value: int32 length including the NUL, bytes, NUL.
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(v.S)+1))
		buf = append(buf, v.S...)
		buf = append(buf, 0)
	case KindObjectID:
		buf = append(buf, v.B[:12]...)
	case KindUUID:
		buf = appendBinData(buf, 4, v.B[:])
	case KindBool:
		buf = append(buf, byte(v.I))
	case KindDate:
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v.I))
	}
	// Null, missing, MinKey and MaxKey have no value bytes.
	return digest64(buf)
}

// appendBinData appends a BSON BinData value: int32 length, subtype, bytes.
func appendBinData(buf []byte, subtype byte, data []byte) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(data)))
	buf = append(buf, subtype)
	return append(buf, data...)
}

// digest64 is the first 8 bytes of the MD5 digest as a little-endian int64.
func digest64(buf []byte) int64 {
	d := md5.Sum(buf)
	return int64(binary.LittleEndian.Uint64(d[:8]))
}

// hashBinData hashes a BinData value of any subtype; it pins the function
// against MongoDB's vectors for non-UUID binaries.
func hashBinData(subtype byte, data []byte) int64 {
	buf := binary.LittleEndian.AppendUint32(nil, 0)
	buf = binary.LittleEndian.AppendUint32(buf, 30)
	return digest64(appendBinData(buf, subtype, data))
}

// safeNumberLongForHash mirrors BSONElement::safeNumberLongForHash: NaN is 0,
// out-of-range doubles clamp to the int64 limits, others truncate toward zero.
func safeNumberLongForHash(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}
