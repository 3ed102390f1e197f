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
		buf = binary.LittleEndian.AppendUint32(buf, 16)
		buf = append(buf, 4)
		buf = append(buf, v.B[:]...)
	case KindBool:
		buf = append(buf, byte(v.I))
	case KindDate:
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v.I))
	}
	// Null, missing, MinKey and MaxKey have no value bytes.
	d := md5.Sum(buf)
	return int64(binary.LittleEndian.Uint64(d[:8]))
}

// hashBinData hashes a BinData value of any subtype; used to pin the function
// against MongoDB's vectors for non-UUID binaries.
func hashBinData(subtype byte, data []byte) int64 {
	buf := make([]byte, 0, 16+len(data))
	buf = binary.LittleEndian.AppendUint32(buf, 0)
	buf = binary.LittleEndian.AppendUint32(buf, 30)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(data)))
	buf = append(buf, subtype)
	buf = append(buf, data...)
	d := md5.Sum(buf)
	return int64(binary.LittleEndian.Uint64(d[:8]))
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
