package advise

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/shardmart/shardmart/internal/sharding"
)

// entry is one stored document as its chunk sees it: the encoded shard-key
// value and the document size. Entries are kept so a split can find the
// median key and a jumbo chunk can be recognised (one key value only).
type entry struct {
	key  string
	pre  uint64 // the key's first 8 bytes, big-endian: most comparisons end here
	size uint32
}

func newEntry(key []byte, size uint32) entry {
	return entry{key: string(key), pre: prefix64(key), size: size}
}

// prefix64 is the first 8 bytes of b, big-endian, zero-padded: comparing it
// first orders like comparing b, and is much cheaper.
func prefix64(b []byte) uint64 {
	var p [8]byte
	copy(p[:], b)
	return binary.BigEndian.Uint64(p[:])
}

func compareEntries(a, b entry) int {
	if a.pre != b.pre {
		return cmp.Compare(a.pre, b.pre)
	}
	return strings.Compare(a.key, b.key)
}

// chunk is the range [min, next chunk's min) of shard-key space.
type chunk struct {
	min     string
	shard   int
	zone    int // index into cluster.zones, -1 for none
	bytes   int64
	entries []entry
	jumbo   bool
}

type zoneState struct {
	name     string
	mask     uint64 // shards allowed
	ranges   [][2]string
	firehose bool
}

// cluster is one sharded collection on N shards. The model is MongoDB 6.0.3+:
// the balancer compares data size per shard (threshold 3 × chunk size) and
// respects zones; ranges are split at the chunk size (what the balancer does
// when it moves a range, and what the pre-6.0.3 auto-splitter did), and a
// range holding a single key value larger than the chunk size is jumbo: it
// cannot be split or moved.
type cluster struct {
	shards      int
	chunkSize   int64
	chunks      []*chunk
	shardBytes  []int64
	shardChunks []int
	zones       []zoneState

	chunkMoves int
	movedBytes int64
	moves      []move
	tick       int
}

// move is one chunk move the balancer ran.
type move struct {
	tick     int
	from, to int
	min      string
	bytes    int64
}

// maxMoveLog bounds the kept chunk-move log; counts stay exact.
const maxMoveLog = 10_000

// keyMax sorts after every encoded key (tags stop at tagMax).
const keyMax = "\xff"

func newCluster(shards int, chunkSize int64) *cluster {
	return &cluster{
		shards:      shards,
		chunkSize:   chunkSize,
		shardBytes:  make([]int64, shards),
		shardChunks: make([]int, shards),
	}
}

// initChunks lays out the empty collection as shardCollection would: a hashed
// first field is pre-split into two chunks per shard spread over all shards;
// a range key starts as one chunk on the primary shard (shard 0).
func (cl *cluster) initChunks(k sharding.Key) {
	if k[0].Kind != sharding.Hashed {
		cl.chunks = []*chunk{{min: "", shard: 0, zone: -1}}
		cl.shardChunks[0] = 1
		return
	}
	n := 2 * cl.shards
	step := math.MaxUint64/uint64(n) + 1
	for i := 0; i < n; i++ {
		min := ""
		if i > 0 {
			var b []byte
			b = appendHashedPart(b, int64(uint64(i)*step+(1<<63)))
			for range k[1:] {
				b = append(b, tagMin)
			}
			min = string(b)
		}
		s := i * cl.shards / n
		cl.chunks = append(cl.chunks, &chunk{min: min, shard: s, zone: -1})
		cl.shardChunks[s]++
	}
}

// zoneViolations counts the chunks on a shard outside their zone.
func (cl *cluster) zoneViolations() int {
	n := 0
	for _, ch := range cl.chunks {
		if ch.zone >= 0 && cl.zones[ch.zone].mask&(1<<ch.shard) == 0 {
			n++
		}
	}
	return n
}

// find returns the index of the chunk holding key.
func (cl *cluster) find(key []byte) int {
	lo, hi := 0, len(cl.chunks)
	for hi-lo > 1 {
		m := int(uint(lo+hi) >> 1)
		if cl.chunks[m].min <= string(key) {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
}

func (cl *cluster) insert(ci int, key []byte, size uint32) {
	c := cl.chunks[ci]
	c.entries = append(c.entries, newEntry(key, size))
	c.bytes += int64(size)
	cl.shardBytes[c.shard] += int64(size)
	if c.bytes > cl.chunkSize && !c.jumbo {
		cl.split(ci)
	}
}

// remove takes a document's bytes off its chunk. Its entry stays as a
// tombstone for split points: deletes are rare in the modelled workloads.
func (cl *cluster) remove(ci int, size uint32) {
	c := cl.chunks[ci]
	if c.bytes < int64(size) {
		size = uint32(c.bytes)
	}
	c.bytes -= int64(size)
	cl.shardBytes[c.shard] -= int64(size)
}

// split cuts an oversized chunk near its byte median, repeating until every
// piece fits or is a single key value (jumbo).
func (cl *cluster) split(ci int) {
	c := cl.chunks[ci]
	k, ok := splitKey(c.entries, c.bytes)
	if !ok {
		c.jumbo = true
		return
	}
	right := cl.cutAt(ci, k)
	if right.bytes > cl.chunkSize {
		cl.split(ci + 1)
	}
	if c.bytes > cl.chunkSize {
		cl.split(ci)
	}
}

// splitKey picks a cut without sorting the chunk: the median of an evenly
// spaced sample is the candidate k, and the cut goes just below k or just
// above it, whichever leaves halves closer in bytes. ok is false when the
// chunk holds a single key value.
func splitKey(es []entry, total int64) (string, bool) {
	const sampleN = 63
	step := max(1, len(es)/sampleN)
	sample := make([]entry, 0, sampleN+1)
	for i := 0; i < len(es); i += step {
		sample = append(sample, es[i])
	}
	slices.SortFunc(sample, compareEntries)
	k := sample[len(sample)/2]
	var less, eq int64
	next := -1 // smallest key above k
	for i := range es {
		switch c := compareEntries(es[i], k); {
		case c < 0:
			less += int64(es[i].size)
		case c == 0:
			eq += int64(es[i].size)
		case next < 0 || compareEntries(es[i], es[next]) < 0:
			next = i
		}
	}
	half := total / 2
	dist := func(x int64) int64 { return max(x-half, half-x) }
	switch {
	case less > 0 && (next < 0 || dist(less) <= dist(less+eq)):
		return k.key, true
	case next >= 0:
		return es[next].key, true
	}
	return "", false
}

// cutAt makes key the lower bound of a new chunk right after chunk ci and
// returns it; both pieces stay on ci's shard and zone.
func (cl *cluster) cutAt(ci int, key string) *chunk {
	c := cl.chunks[ci]
	right := &chunk{min: key, shard: c.shard, zone: c.zone}
	k := entry{key: key, pre: prefix64([]byte(key))}
	left := c.entries[:0]
	for _, e := range c.entries {
		if compareEntries(e, k) >= 0 {
			right.entries = append(right.entries, e)
			right.bytes += int64(e.size)
		} else {
			left = append(left, e)
		}
	}
	// Clip capacity so appends to the left piece never reach stale entries.
	c.entries = left[:len(left):len(left)]
	c.bytes -= right.bytes
	cl.chunks = slices.Insert(cl.chunks, ci+1, right)
	cl.shardChunks[c.shard]++
	return right
}

// splitAt makes key a chunk boundary (zone bounds must be chunk bounds).
func (cl *cluster) splitAt(key string) {
	if key == "" || key >= keyMax {
		return
	}
	ci := cl.find([]byte(key))
	c := cl.chunks[ci]
	if c.min == key {
		return
	}
	right := cl.cutAt(ci, key)
	c.jumbo, right.jumbo = false, false
}

// applyZones splits at every zone bound and tags chunks with their zone.
func (cl *cluster) applyZones() {
	for _, z := range cl.zones {
		for _, r := range z.ranges {
			cl.splitAt(r[0])
			cl.splitAt(r[1])
		}
	}
	for _, c := range cl.chunks {
		c.zone = -1
		for zi, z := range cl.zones {
			for _, r := range z.ranges {
				if c.min >= r[0] && c.min < r[1] {
					c.zone = zi
				}
			}
		}
	}
}

// placeZones moves the chunks of an empty collection onto their zones'
// shards, as shardCollection does for zones defined beforehand (4.0.3+).
func (cl *cluster) placeZones() {
	next := make([]int, len(cl.zones))
	for _, c := range cl.chunks {
		if c.zone < 0 || cl.zones[c.zone].mask&(1<<c.shard) != 0 {
			continue
		}
		z := cl.zones[c.zone]
		for s := next[c.zone]; ; s = (s + 1) % cl.shards {
			if z.mask&(1<<s) != 0 {
				cl.shardChunks[c.shard]--
				cl.shardChunks[s]++
				c.shard = s
				next[c.zone] = (s + 1) % cl.shards
				break
			}
		}
	}
}

func (cl *cluster) move(c *chunk, to int) {
	cl.shardBytes[c.shard] -= c.bytes
	cl.shardChunks[c.shard]--
	cl.shardBytes[to] += c.bytes
	cl.shardChunks[to]++
	if len(cl.moves) < maxMoveLog {
		cl.moves = append(cl.moves, move{tick: cl.tick, from: c.shard, to: to, min: c.min, bytes: c.bytes})
	}
	c.shard = to
	cl.chunkMoves++
	cl.movedBytes += c.bytes
}

// balance runs up to rounds balancer rounds and returns the chunk moves made.
// Per round each shard joins at most one chunk move. Zone violations are fixed
// first; then, per zone and for the unzoned ranges, data moves from the shard
// with the most to the one with the least while the difference is at least
// 3 × chunk size (MongoDB 6.0.3+ balancing threshold).
func (cl *cluster) balance(rounds int) int {
	moved := 0
	all := uint64(1)<<cl.shards - 1
	for r := 0; r < rounds; r++ {
		var busy uint64
		before := moved
		for _, c := range cl.chunks {
			if c.zone < 0 || c.jumbo || cl.zones[c.zone].mask&(1<<c.shard) != 0 || busy&(1<<c.shard) != 0 {
				continue
			}
			if to := cl.leastLoaded(cl.zones[c.zone].mask &^ busy); to >= 0 {
				busy |= 1<<c.shard | 1<<to
				cl.move(c, to)
				moved++
			}
		}
		for g := -1; g < len(cl.zones); g++ {
			mask := all
			if g >= 0 {
				mask = cl.zones[g].mask
			}
			load := make([]int64, cl.shards)
			for _, c := range cl.chunks {
				if c.zone == g {
					load[c.shard] += c.bytes
				}
			}
			for {
				free := mask &^ busy
				if bits.OnesCount64(free) < 2 {
					break
				}
				donor, recv := -1, -1
				for s := 0; s < cl.shards; s++ {
					if free&(1<<s) == 0 {
						continue
					}
					if donor < 0 || load[s] > load[donor] {
						donor = s
					}
					if recv < 0 || load[s] < load[recv] {
						recv = s
					}
				}
				if load[donor]-load[recv] < 3*cl.chunkSize {
					break
				}
				var pick *chunk
				for _, c := range cl.chunks {
					if c.shard == donor && c.zone == g && !c.jumbo && c.bytes > 0 {
						pick = c
						break
					}
				}
				busy |= 1<<donor | 1<<recv
				if pick == nil {
					continue
				}
				load[donor] -= pick.bytes
				load[recv] += pick.bytes
				cl.move(pick, recv)
				moved++
			}
		}
		if moved == before {
			break
		}
	}
	return moved
}

func (cl *cluster) leastLoaded(mask uint64) int {
	best := -1
	for s := 0; s < cl.shards; s++ {
		if mask&(1<<s) != 0 && (best < 0 || cl.shardBytes[s] < cl.shardBytes[best]) {
			best = s
		}
	}
	return best
}

// shardsHit counts the shards owning chunks that intersect [lo, hi].
func (cl *cluster) shardsHit(lo, hi []byte) int {
	var mask uint64
	for i := cl.find(lo); i < len(cl.chunks) && cl.chunks[i].min <= string(hi); i++ {
		mask |= 1 << cl.chunks[i].shard
	}
	return bits.OnesCount64(mask)
}

// owningShards counts shards that hold at least one chunk: a broadcast
// (scatter-gather) operation contacts all of them.
func (cl *cluster) owningShards() int {
	n := 0
	for _, c := range cl.shardChunks {
		if c > 0 {
			n++
		}
	}
	return n
}
