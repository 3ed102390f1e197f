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

// genKinds are the generator names workload files use.
var genKinds = map[string]genKind{
	"objectid": genObjectID, "seq": genSeq, "int": genInt, "choice": genChoice, "ref": genRef,
	"uuid": genUUID, "random": genRandom, "ip": genIP, "date": genDate, "const": genConst, "array": genArray,
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
	zipfS, err := p.zipf(where, get)
	if err != nil {
		return err
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
		return p.intGen(n, where, f, get, zipfS)
	case genChoice:
		return p.choice(n, where, f, get, zipfS)
	case genRef:
		return p.refGen(n, where, f, get, zipfS)
	case genConst:
		v := get("value")
		if v == nil {
			return p.errf(n, where+".value", "const needs value")
		}
		f.constant = scalarValue(v)
	case genIP:
		return p.ipGen(where, f, get)
	}
	return nil
}

// zipf reads dist (and s for zipf): the Zipf exponent, 0 for uniform.
func (p *parser) zipf(where string, get func(string) *yaml.Node) (float64, error) {
	v := get("dist")
	if v == nil {
		return 0, nil
	}
	switch v.Value {
	case "uniform":
		return 0, nil
	case "zipf":
		if sv := get("s"); sv != nil {
			return p.float(sv, where+".s", 0.01, 10)
		}
		return 1.1, nil
	}
	return 0, p.errf(v, where+".dist", "want uniform or zipf, got %q", v.Value)
}

// intGen reads int's min and max.
func (p *parser) intGen(n *yaml.Node, where string, f *Field, get func(string) *yaml.Node, zipfS float64) error {
	lo, hi := get("min"), get("max")
	if lo == nil || hi == nil {
		return p.errf(n, where, "int needs min and max")
	}
	var err error
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
	return nil
}

// refGen reads ref's pool of existing ids and the share of new ones.
func (p *parser) refGen(n *yaml.Node, where string, f *Field, get func(string) *yaml.Node, zipfS float64) error {
	v := get("pool")
	if v == nil {
		return p.errf(n, where+".pool", "ref needs pool (number of existing ids)")
	}
	var err error
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
	return nil
}

// ipGen reads ip's weighted first-octet ranges (default: any octet).
func (p *parser) ipGen(where string, f *Field, get func(string) *yaml.Node) error {
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

// gcd picks a multiplier coprime to a ref pool, so rank -> id is a bijection.
func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
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
