package advise

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"gopkg.in/yaml.v3"
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

var genKinds = map[string]genKind{
	"objectid": genObjectID, "seq": genSeq, "int": genInt, "choice": genChoice, "ref": genRef,
	"uuid": genUUID, "random": genRandom, "ip": genIP, "date": genDate, "const": genConst, "array": genArray,
}

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
		return c.Sample[d%int64(len(c.Sample))].vals[fi]
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

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// genFields parses the fields mapping: name -> generator (a name, or a
// mapping with gen and its parameters).
func (p *parser) genFields(n *yaml.Node, where string, c *Collection) error {
	order, m, err := p.fields(n, where, nil...)
	if err != nil {
		return err
	}
	if len(order) == 0 {
		return p.errf(n, where, "at least one field is required")
	}
	for _, name := range order {
		f, err := p.genField(m[name], join(where, name), name)
		if err != nil {
			return err
		}
		c.addField(f)
	}
	return nil
}

func (p *parser) genField(n *yaml.Node, where, name string) (*Field, error) {
	f := &Field{Name: name}
	if n.Kind == yaml.ScalarNode {
		k, ok := genKinds[n.Value]
		if !ok {
			return nil, p.errf(n, where, "unknown generator %q (want one of %s)", n.Value, genNames())
		}
		if k == genChoice || k == genRef || k == genInt || k == genConst {
			return nil, p.errf(n, where, "generator %q needs parameters: use {gen: %s, ...}", n.Value, n.Value)
		}
		f.kind = k
		return f, p.finishField(n, where, f, nil)
	}
	_, m, err := p.fields(n, where, "gen", "null", "min", "max", "dist", "s", "values", "weights", "n", "prefix", "pool", "new", "value", "first_octet")
	if err != nil {
		return nil, err
	}
	gn := m["gen"]
	if gn == nil {
		return nil, p.errf(n, where+".gen", "required (one of %s)", genNames())
	}
	k, ok := genKinds[gn.Value]
	if !ok {
		return nil, p.errf(gn, where+".gen", "unknown generator %q (want one of %s)", gn.Value, genNames())
	}
	f.kind = k
	return f, p.finishField(n, where, f, m)
}

func genNames() string {
	names := make([]string, 0, len(genKinds))
	for k := range genKinds {
		names = append(names, k)
	}
	sort.Strings(names)
	return fmt.Sprint(names)
}

// finishField validates a generator's parameters; m is nil for shorthands.
func (p *parser) finishField(n *yaml.Node, where string, f *Field, m map[string]*yaml.Node) error {
	var err error
	get := func(k string) *yaml.Node {
		if m == nil {
			return nil
		}
		return m[k]
	}
	if v := get("null"); v != nil {
		if f.nullFrac, err = p.float(v, where+".null", 0, 1); err != nil {
			return err
		}
	}
	var zipfS float64
	if v := get("dist"); v != nil {
		switch v.Value {
		case "uniform":
		case "zipf":
			zipfS = 1.1
			if sv := get("s"); sv != nil {
				if zipfS, err = p.float(sv, where+".s", 0.01, 10); err != nil {
					return err
				}
			}
		default:
			return p.errf(v, where+".dist", "want uniform or zipf, got %q", v.Value)
		}
	}
	switch f.kind {
	case genArray:
		f.arrayWhere = fmt.Sprintf("generator array at %s:%d", p.file, n.Line)
	case genSeq:
		if v := get("min"); v != nil {
			if f.min, err = p.int(v, where+".min", math.MinInt64); err != nil {
				return err
			}
		}
	case genInt:
		lo, hi := get("min"), get("max")
		if lo == nil || hi == nil {
			return p.errf(n, where, "int needs min and max")
		}
		var max int64
		if f.min, err = p.int(lo, where+".min", math.MinInt64); err != nil {
			return err
		}
		if max, err = p.int(hi, where+".max", f.min); err != nil {
			return err
		}
		f.pool = max - f.min + 1
		if zipfS > 0 {
			if f.pool > 1_000_000 {
				return p.errf(hi, where+".max", "zipf over at most 1000000 values, got %d", f.pool)
			}
			f.dist = newSampler(zipfWeights(int(f.pool), zipfS))
		}
	case genChoice:
		if err := p.choice(n, where, f, get, zipfS); err != nil {
			return err
		}
	case genRef:
		v := get("pool")
		if v == nil {
			return p.errf(n, where+".pool", "ref needs pool (number of existing ids)")
		}
		if f.pool, err = p.int(v, where+".pool", 1); err != nil {
			return err
		}
		if zipfS > 0 {
			if f.pool > 2_000_000 {
				return p.errf(v, where+".pool", "zipf over at most 2000000 ids, got %d", f.pool)
			}
			f.dist = newSampler(zipfWeights(int(f.pool), zipfS))
		}
		f.perm = 2654435761
		for gcd(f.perm, uint64(f.pool)) != 1 {
			f.perm += 2
		}
		if nv := get("new"); nv != nil {
			if f.newFrac, err = p.float(nv, where+".new", 0, 1); err != nil {
				return err
			}
		}
	case genConst:
		v := get("value")
		if v == nil {
			return p.errf(n, where+".value", "const needs value")
		}
		f.constant = scalarValue(v)
	case genIP:
		f.octets = [][2]int{{0, 255}}
		w := []float64{1}
		if v := get("first_octet"); v != nil {
			f.octets, w = nil, nil
			if v.Kind != yaml.SequenceNode {
				return p.errf(v, where+".first_octet", "want a list of {from, to, weight}")
			}
			for i, rn := range v.Content {
				at := fmt.Sprintf("%s.first_octet[%d]", where, i)
				_, rm, err := p.fields(rn, at, "from", "to", "weight")
				if err != nil {
					return err
				}
				if rm["from"] == nil || rm["to"] == nil {
					return p.errf(rn, at, "from and to are required")
				}
				from, err := p.int(rm["from"], at+".from", 0)
				if err != nil {
					return err
				}
				to, err := p.int(rm["to"], at+".to", from)
				if err != nil {
					return err
				}
				if to > 255 {
					return p.errf(rm["to"], at+".to", "an octet is at most 255")
				}
				weight := 1.0
				if wn := rm["weight"]; wn != nil {
					if weight, err = p.float(wn, at+".weight", 0, math.MaxFloat64); err != nil {
						return err
					}
				}
				f.octets = append(f.octets, [2]int{int(from), int(to)})
				w = append(w, weight)
			}
		}
		f.dist = newSampler(w)
	}
	return nil
}

func (p *parser) choice(n *yaml.Node, where string, f *Field, get func(string) *yaml.Node, zipfS float64) error {
	if v := get("values"); v != nil {
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			return p.errf(v, where+".values", "want a non-empty list")
		}
		for _, vn := range v.Content {
			f.values = append(f.values, scalarValue(vn))
		}
	} else if v := get("n"); v != nil {
		cnt, err := p.int(v, where+".n", 1)
		if err != nil {
			return err
		}
		if cnt > 1_000_000 {
			return p.errf(v, where+".n", "at most 1000000 values, got %d", cnt)
		}
		prefix := ""
		if pv := get("prefix"); pv != nil {
			prefix = pv.Value
		}
		width := len(strconv.FormatInt(cnt-1, 10))
		for i := int64(0); i < cnt; i++ {
			f.values = append(f.values, String(fmt.Sprintf("%s%0*d", prefix, width, i)))
		}
	} else {
		return p.errf(n, where, "choice needs values or n")
	}
	switch wv := get("weights"); {
	case wv != nil:
		if wv.Kind != yaml.SequenceNode || len(wv.Content) != len(f.values) {
			return p.errf(wv, where+".weights", "want one weight per value (%d)", len(f.values))
		}
		w := make([]float64, len(wv.Content))
		for i, x := range wv.Content {
			var err error
			if w[i], err = p.float(x, where+".weights", 0, math.MaxFloat64); err != nil {
				return err
			}
		}
		f.dist = newSampler(w)
	case zipfS > 0:
		f.dist = newSampler(zipfWeights(len(f.values), zipfS))
	default:
		w := make([]float64, len(f.values))
		for i := range w {
			w[i] = 1
		}
		f.dist = newSampler(w)
	}
	return nil
}

// sampleDoc is one real document of a sample file, reduced to its top-level
// field values and its BSON size.
type sampleDoc struct {
	vals []Value
	size int
}

// sample loads JSON lines (relaxed or canonical Extended JSON, as mongoexport
// and shardmart's store export write them).
func (p *parser) sample(n *yaml.Node, where string, c *Collection) error {
	name, err := p.str(n, where)
	if err != nil {
		return err
	}
	if p.open == nil {
		return p.errf(n, where, "sample files are not available here")
	}
	data, err := p.open(name)
	if err != nil {
		return p.errf(n, where, "%v", err)
	}
	c.SampleFile = name
	type raw struct {
		doc  bson.D // flattened: nested fields under dotted names
		line int
		size int
	}
	var docs []raw
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var d bson.D
		if err := bson.UnmarshalExtJSON(line, false, &d); err != nil {
			return &InputError{File: name, Line: i + 1, Msg: "not a JSON document: " + err.Error()}
		}
		size := c.DocBytes
		if b, err := bson.Marshal(d); err == nil {
			size = len(b)
		}
		docs = append(docs, raw{flatten(d, ""), i + 1, size})
		for _, e := range docs[len(docs)-1].doc {
			if _, ok := c.fieldIdx[e.Key]; !ok {
				c.addField(&Field{Name: e.Key, kind: genSample})
			}
		}
	}
	if len(docs) == 0 {
		return p.errf(n, where, "sample %s holds no documents", name)
	}
	for _, r := range docs {
		sd := sampleDoc{vals: make([]Value, len(c.Fields)), size: r.size}
		for _, e := range r.doc {
			fi := c.fieldIdx[e.Key]
			v := bsonValue(e.Value)
			if v.Kind == KindArray && !c.Fields[fi].isArray() {
				c.Fields[fi].arrayWhere = fmt.Sprintf("array in %s:%d", name, r.line)
			}
			sd.vals[fi] = v
		}
		c.Sample = append(c.Sample, sd)
	}
	return nil
}

// flatten lists a document's fields with nested documents' fields under
// dotted names as well ("customer.id"), since a shard key may be a dotted path.
func flatten(d bson.D, prefix string) bson.D {
	var out bson.D
	for _, e := range d {
		name := prefix + e.Key
		out = append(out, bson.E{Key: name, Value: e.Value})
		if sub, ok := e.Value.(bson.D); ok {
			out = append(out, flatten(sub, name+".")...)
		}
	}
	return out
}

func bsonValue(x any) Value {
	switch v := x.(type) {
	case nil:
		return Null()
	case string:
		return String(v)
	case int32:
		return Int(int64(v))
	case int64:
		return Int(v)
	case float64:
		return Double(v)
	case bool:
		return Bool(v)
	case bson.ObjectID:
		return ObjectID(v)
	case bson.DateTime:
		return Value{Kind: KindDate, I: int64(v)}
	case bson.A:
		return Value{Kind: KindArray}
	case bson.D:
		return Value{Kind: KindObject}
	case bson.Binary:
		if v.Subtype == 4 && len(v.Data) == 16 {
			u := Value{Kind: KindUUID}
			copy(u.B[:], v.Data)
			return u
		}
	}
	return String(fmt.Sprint(x))
}
