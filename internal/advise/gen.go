package advise

import (
	"math"
	"sort"
)

type genKind uint8

const (
	genObjectID genKind = iota
	genSeq
	genInt
	genChoice
	genRef
	genUUID
	genRandom
	genIP
	genDate
	genConst
	genArray
	genSample
)

// Field is one document field and how its values are produced. Values are a
// pure function of (seed, document number, field), so an operation on
// document d regenerates d's fields instead of storing every document.
type Field struct {
	Name       string
	kind       genKind
	nullFrac   float64
	min        int64
	dist       *sampler // weights for choice, zipf int, zipf ref, ip octets
	values     []Value  // choice values
	pool       int64    // ref: existing ids
	perm       uint64   // ref: rank -> id bijection multiplier
	newFrac    float64  // ref: share of references to ids created now
	constant   Value
	octets     [][2]int
	arrayWhere string // where the field was seen holding an array
}

func (f *Field) isArray() bool { return f.arrayWhere != "" }

// ascending reports whether values grow with insertion order.
func (f *Field) ascending() bool {
	return f.nullFrac == 0 && (f.kind == genObjectID || f.kind == genDate || f.kind == genSeq)
}

// docGen generates documents of one collection for one simulation.
type docGen struct {
	c         *Collection
	seed      uint64
	t0        int64   // ms
	msPerDoc  float64 // simulated time between inserts
	oidProc   [5]byte
	refProc   [5]byte
	ipScratch []byte
}

func newDocGen(c *Collection, seed uint64, t0 int64, msPerDoc float64) *docGen {
	g := &docGen{c: c, seed: seed, t0: t0, msPerDoc: msPerDoc}
	r := mix(seed, 0xabc)
	for i := range g.oidProc {
		g.oidProc[i] = byte(r >> (8 * i))
		g.refProc[i] = byte(r >> (8 * (i + 3)))
	}
	return g
}

// mix is splitmix64 over the inputs: cheap, stateless, reproducible.
func mix(a, b uint64) uint64 {
	z := a + 0x9e3779b97f4a7c15*(b+1)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func unit(r uint64) float64 { return float64(r>>11) / (1 << 53) }

// timeOf is the simulated insert time of document d in ms.
func (g *docGen) timeOf(d int64) int64 { return g.t0 + int64(float64(d)*g.msPerDoc) }

func (g *docGen) objectID(tsMs int64, proc [5]byte, counter uint64) Value {
	v := Value{Kind: KindObjectID}
	ts := uint32(tsMs / 1000)
	v.B[0], v.B[1], v.B[2], v.B[3] = byte(ts>>24), byte(ts>>16), byte(ts>>8), byte(ts)
	copy(v.B[4:9], proc[:])
	v.B[9], v.B[10], v.B[11] = byte(counter>>16), byte(counter>>8), byte(counter)
	return v
}

// value returns field fi of document d.
func (g *docGen) value(d int64, fi int) Value {
	c := g.c
	if c.Sample != nil {
		return c.sampleAt(d).vals[fi]
	}
	f := c.Fields[fi]
	r := mix(g.seed^uint64(fi)*0x632be59bd9b4e019, uint64(d))
	if f.nullFrac > 0 && unit(mix(r, 1)) < f.nullFrac {
		return Null()
	}
	switch f.kind {
	case genObjectID:
		return g.objectID(g.timeOf(d), g.oidProc, uint64(d))
	case genSeq:
		return Int(f.min + d)
	case genDate:
		return Value{Kind: KindDate, I: g.timeOf(d)}
	case genInt:
		if f.dist != nil {
			return Int(f.min + int64(f.dist.pick(unit(r))))
		}
		return Int(f.min + int64(r%uint64(f.pool)))
	case genChoice:
		return f.values[f.dist.pick(unit(r))]
	case genRef:
		if f.newFrac > 0 && unit(mix(r, 2)) < f.newFrac {
			// A brand-new id (a user who just signed up): ObjectIds of now.
			return g.objectID(g.timeOf(d), g.oidProc, uint64(d)^0x800000)
		}
		var rank uint64
		if f.dist != nil {
			rank = uint64(f.dist.pick(unit(r)))
		} else {
			rank = r % uint64(f.pool)
		}
		j := (rank * f.perm) % uint64(f.pool)
		// Existing ids were created over the year before the simulation.
		const year = 365 * 24 * 3600 * 1000
		ts := g.t0 - year + int64(float64(j)*float64(year)/float64(f.pool))
		return g.objectID(ts, g.refProc, j)
	case genUUID:
		v := Value{Kind: KindUUID}
		a, b := mix(r, 3), mix(r, 4)
		for i := 0; i < 8; i++ {
			v.B[i], v.B[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
		}
		v.B[6] = v.B[6]&0x0f | 0x40
		v.B[8] = v.B[8]&0x3f | 0x80
		return v
	case genRandom:
		return Double(unit(r))
	case genIP:
		rg := f.octets[f.dist.pick(unit(r))]
		first := rg[0] + int(mix(r, 5)%uint64(rg[1]-rg[0]+1))
		b := g.ipScratch[:0]
		for i, o := range [4]int{first, int(byte(r >> 8)), int(byte(r >> 16)), int(byte(r >> 24))} {
			if i > 0 {
				b = append(b, '.')
			}
			b = append(b, byte('0'+o/100), byte('0'+o/10%10), byte('0'+o%10))
		}
		g.ipScratch = b
		return String(string(b))
	case genConst:
		return f.constant
	case genArray:
		return Value{Kind: KindArray}
	}
	return Null()
}

// pick finds the bucket of u in a cumulative distribution ending at 1.
func pick(cdf []float64, u float64) int {
	i := sort.SearchFloat64s(cdf, u)
	if i >= len(cdf) {
		i = len(cdf) - 1
	}
	// SearchFloat64s finds cdf[i] >= u; u == cdf[i] belongs to bucket i+1.
	if cdf[i] == u && i+1 < len(cdf) {
		i++
	}
	return i
}

func cumulative(w []float64) []float64 {
	var sum float64
	for _, x := range w {
		sum += x
	}
	out := make([]float64, len(w))
	var acc float64
	for i, x := range w {
		acc += x
		out[i] = acc / sum
	}
	out[len(out)-1] = 1
	return out
}

func zipfWeights(n int, s float64) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = 1 / math.Pow(float64(i+1), s)
	}
	return w
}

// sampler draws bucket i with probability w[i]/sum(w) in O(1) (Walker's
// alias method): Zipf pools of 10^5 ids are drawn on most operations, where a
// binary search over the cumulative weights cost a fifth of the run.
type sampler struct {
	prob  []float64
	alias []int32
}

func newSampler(w []float64) *sampler {
	n := len(w)
	var sum float64
	for _, x := range w {
		sum += x
	}
	s := &sampler{prob: make([]float64, n), alias: make([]int32, n)}
	scaled := make([]float64, n)
	var small, large []int32
	for i, x := range w {
		scaled[i] = x * float64(n) / sum
		if scaled[i] < 1 {
			small = append(small, int32(i))
		} else {
			large = append(large, int32(i))
		}
	}
	for len(small) > 0 && len(large) > 0 {
		l, g := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		s.prob[l], s.alias[l] = scaled[l], g
		scaled[g] -= 1 - scaled[l]
		if scaled[g] < 1 {
			large = large[:len(large)-1]
			small = append(small, g)
		}
	}
	for _, i := range append(small, large...) {
		s.prob[i], s.alias[i] = 1, i
	}
	return s
}

// pick maps u in [0,1) to a bucket.
func (s *sampler) pick(u float64) int {
	x := u * float64(len(s.prob))
	i := int(x)
	if i >= len(s.prob) {
		i = len(s.prob) - 1
	}
	if x-float64(i) < s.prob[i] {
		return i
	}
	return int(s.alias[i])
}

// sampleDoc is one real document of a sample file, reduced to its top-level
// field values and its BSON size.
type sampleDoc struct {
	vals []Value
	size int
}
