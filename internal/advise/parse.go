package advise

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shardmart/shardmart/internal/sharding"
	"gopkg.in/yaml.v3"
)

// ParseWorkload decodes a workload. file names the source in errors; open
// reads sample files (nil forbids them).
func ParseWorkload(data []byte, file string, open func(string) ([]byte, error)) (*Workload, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, &InputError{File: file, Line: yamlErrLine(err), Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(root.Content) == 0 {
		return nil, &InputError{File: file, Msg: "empty workload"}
	}
	p := &parser{file: file, open: open}
	return p.workload(root.Content[0])
}

func yamlErrLine(err error) int {
	var n int
	s := err.Error()
	if i := strings.Index(s, "line "); i >= 0 {
		fmt.Sscanf(s[i:], "line %d", &n)
	}
	return n
}

// opTypes are the operation types workload files use.
var opTypes = map[string]OpType{"insert": OpInsert, "find": OpFind, "update": OpUpdate, "delete": OpDelete}

type parser struct {
	file string
	open func(string) ([]byte, error)
}

func (p *parser) errf(n *yaml.Node, field, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &InputError{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// fields returns the keys of a mapping in order, rejecting unknown and
// duplicate keys so a typo never silently falls back to a default.
func (p *parser) fields(n *yaml.Node, where string, allowed ...string) ([]string, map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, nil, p.errf(n, where, "want a mapping, got %s", nodeKind(n))
	}
	ok := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		ok[a] = true
	}
	var order []string
	m := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := join(where, k.Value)
		if allowed != nil && !ok[k.Value] {
			return nil, nil, p.errf(k, name, "unknown field (allowed: %s)", strings.Join(allowed, ", "))
		}
		if _, dup := m[k.Value]; dup {
			return nil, nil, p.errf(k, name, "duplicate field")
		}
		m[k.Value] = v
		order = append(order, k.Value)
	}
	return order, m, nil
}

func join(where, field string) string {
	if where == "" {
		return field
	}
	return where + "." + field
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

func (p *parser) str(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", p.errf(n, field, "want a string, got %s", nodeKind(n))
	}
	return n.Value, nil
}

func (p *parser) int(n *yaml.Node, field string, min int64) (int64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, field, "want an integer, got %s", nodeKind(n))
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 10, 64)
	if err != nil {
		return 0, p.errf(n, field, "want an integer, got %q", n.Value)
	}
	if v < min {
		return 0, p.errf(n, field, "must be at least %d, got %d", min, v)
	}
	return v, nil
}

func (p *parser) float(n *yaml.Node, field string, min, max float64) (float64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, field, "want a number, got %s", nodeKind(n))
	}
	v, err := strconv.ParseFloat(n.Value, 64)
	if err != nil {
		return 0, p.errf(n, field, "want a number, got %q", n.Value)
	}
	if v < min || v > max {
		return 0, p.errf(n, field, "must be between %g and %g, got %g", min, max, v)
	}
	return v, nil
}

func (p *parser) bool(n *yaml.Node, field string) (bool, error) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		return false, p.errf(n, field, "want true or false, got %s", nodeKind(n))
	}
	return b, nil
}

// size parses "8MiB", "128MB" (MongoDB's chunk-size MB are MiB), "64KiB", "512".
func (p *parser) size(n *yaml.Node, field string) (int64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, field, "want a size like 128MiB, got %s", nodeKind(n))
	}
	s := strings.TrimSpace(n.Value)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, p.errf(n, field, "want a positive size like 128MiB, got %q", n.Value)
	}
	return v * mult, nil
}

func (p *parser) workload(n *yaml.Node) (*Workload, error) {
	order, m, err := p.fields(n, "", "name", "description", "shards", "chunk_size", "ops", "days", "ticks_per_day", "seed", "balancer", "collections")
	if err != nil {
		return nil, err
	}
	w := &Workload{Shards: 4, ChunkSize: 128 << 20, Ops: 200_000, Days: 1, TicksPerDay: 24, Seed: 1,
		Balancer: BalancerConfig{Enabled: true, RoundsPerTick: 16}}
	// Collections last: their zones are checked against the shard count.
	if i := slices.Index(order, "collections"); i >= 0 {
		order = append(slices.Delete(order, i, i+1), "collections")
	}
	for _, k := range order {
		v := m[k]
		var x int64
		switch k {
		case "name":
			w.Name, err = p.str(v, k)
		case "description":
			w.Description, err = p.str(v, k)
		case "shards":
			x, err = p.int(v, k, 1)
			if err == nil && x > 64 {
				err = p.errf(v, k, "at most 64 shards, got %d", x)
			}
			w.Shards = int(x)
		case "chunk_size":
			w.ChunkSize, err = p.size(v, k)
		case "ops":
			w.Ops, err = p.int(v, k, 1)
		case "days":
			x, err = p.int(v, k, 1)
			w.Days = int(x)
		case "ticks_per_day":
			x, err = p.int(v, k, 1)
			w.TicksPerDay = int(x)
		case "seed":
			x, err = p.int(v, k, 0)
			w.Seed = uint64(x)
		case "balancer":
			err = p.balancer(v, &w.Balancer)
		case "collections":
			w.Collections, err = p.collections(v, w)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(w.Collections) == 0 {
		return nil, p.errf(n, "collections", "at least one collection is required")
	}
	// Each tick keeps a snapshot per shard and runs the balancer: bound them.
	if t := int64(w.Days) * int64(w.TicksPerDay); t > 100_000 {
		return nil, p.errf(n, "ticks_per_day", "days × ticks_per_day is %d, at most 100000", t)
	}
	return w, nil
}

func (p *parser) balancer(n *yaml.Node, b *BalancerConfig) error {
	order, m, err := p.fields(n, "balancer", "enabled", "rounds_per_tick")
	if err != nil {
		return err
	}
	for _, k := range order {
		switch k {
		case "enabled":
			b.Enabled, err = p.bool(m[k], "balancer."+k)
		case "rounds_per_tick":
			var x int64
			x, err = p.int(m[k], "balancer."+k, 1)
			b.RoundsPerTick = int(x)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) collections(n *yaml.Node, w *Workload) ([]*Collection, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, "collections", "want a list, got %s", nodeKind(n))
	}
	var out []*Collection
	for i, cn := range n.Content {
		c, err := p.collection(cn, fmt.Sprintf("collections[%d]", i), w)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (p *parser) collection(n *yaml.Node, where string, w *Workload) (*Collection, error) {
	_, m, err := p.fields(n, where, "name", "doc_bytes", "fields", "sample", "sample_repeat", "candidates", "operations")
	if err != nil {
		return nil, err
	}
	c := &Collection{DocBytes: 512, fieldIdx: map[string]int{}}
	if v := m["name"]; v != nil {
		if c.Name, err = p.str(v, where+".name"); err != nil {
			return nil, err
		}
	} else {
		return nil, p.errf(n, where+".name", "required")
	}
	where = "collection " + c.Name
	if v := m["doc_bytes"]; v != nil {
		x, err := p.int(v, where+".doc_bytes", 1)
		if err != nil {
			return nil, err
		}
		c.DocBytes = int(x)
	}
	if v := m["sample_repeat"]; v != nil {
		if m["sample"] == nil {
			return nil, p.errf(v, where+".sample_repeat", "only with sample")
		}
		if c.SampleRepeat, err = p.int(v, where+".sample_repeat", 1); err != nil {
			return nil, err
		}
	}
	switch {
	case m["fields"] != nil && m["sample"] != nil:
		return nil, p.errf(m["sample"], where+".sample", "use either fields (generators) or sample (real documents), not both")
	case m["fields"] != nil:
		if err := p.genFields(m["fields"], where+".fields", c); err != nil {
			return nil, err
		}
	case m["sample"] != nil:
		if err := p.sample(m["sample"], where+".sample", c); err != nil {
			return nil, err
		}
	default:
		return nil, p.errf(n, where+".fields", "required (or sample)")
	}
	if m["operations"] == nil {
		return nil, p.errf(n, where+".operations", "required")
	}
	if c.Operations, err = p.operations(m["operations"], where+".operations", c); err != nil {
		return nil, err
	}
	if m["candidates"] == nil {
		return nil, p.errf(n, where+".candidates", "required")
	}
	if c.Candidates, err = p.candidates(m["candidates"], where+".candidates", c, w); err != nil {
		return nil, err
	}
	return c, nil
}

func (p *parser) operations(n *yaml.Node, where string, c *Collection) ([]Operation, error) {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, p.errf(n, where, "want a non-empty list of operations")
	}
	var ops []Operation
	for i, on := range n.Content {
		at := fmt.Sprintf("%s[%d]", where, i)
		order, m, err := p.fields(on, at, "name", "type", "weight", "filter", "range", "pick")
		if err != nil {
			return nil, err
		}
		op := Operation{Weight: 1, Type: OpFind}
		for _, k := range order {
			v := m[k]
			switch k {
			case "name":
				op.Name, err = p.str(v, at+".name")
			case "type":
				var s string
				if s, err = p.str(v, at+".type"); err == nil {
					t, ok := opTypes[s]
					if !ok {
						err = p.errf(v, at+".type", "unknown operation type %q (want insert, find, update or delete)", s)
					}
					op.Type = t
				}
			case "weight":
				var x int64
				x, err = p.int(v, at+".weight", 0)
				op.Weight = int(x)
			case "filter":
				op.Filter, err = p.fieldList(v, at+".filter", c)
			case "range":
				op.Range, err = p.rangeFilter(v, at+".range", c)
			case "pick":
				var s string
				if s, err = p.str(v, at+".pick"); err == nil {
					switch s {
					case "uniform":
					case "recent":
						op.Recent = true
					default:
						err = p.errf(v, at+".pick", "want uniform or recent, got %q", s)
					}
				}
			}
			if err != nil {
				return nil, err
			}
		}
		if op.Name == "" {
			op.Name = fmt.Sprintf("op%d", i+1)
		}
		if op.Type == OpInsert && (op.Filter != nil || op.Range != nil) {
			return nil, p.errf(on, at+".filter", "an insert has no filter")
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func (p *parser) fieldList(n *yaml.Node, where string, c *Collection) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, where, "want a list of field names, got %s", nodeKind(n))
	}
	out := []string{}
	for _, fn := range n.Content {
		s, err := p.str(fn, where)
		if err != nil {
			return nil, err
		}
		if _, ok := c.fieldIdx[s]; !ok {
			return nil, p.errf(fn, where, "unknown field %q (declared: %s)", s, c.fieldNames())
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *parser) rangeFilter(n *yaml.Node, where string, c *Collection) (*RangeFilter, error) {
	_, m, err := p.fields(n, where, "field", "span")
	if err != nil {
		return nil, err
	}
	r := &RangeFilter{Span: 100}
	if m["field"] == nil {
		return nil, p.errf(n, where+".field", "required")
	}
	if r.Field, err = p.str(m["field"], where+".field"); err != nil {
		return nil, err
	}
	if _, ok := c.fieldIdx[r.Field]; !ok {
		return nil, p.errf(m["field"], where+".field", "unknown field %q (declared: %s)", r.Field, c.fieldNames())
	}
	if v := m["span"]; v != nil {
		if r.Span, err = p.int(v, where+".span", 1); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (p *parser) candidates(n *yaml.Node, where string, c *Collection, w *Workload) ([]Candidate, error) {
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, p.errf(n, where, "want a non-empty list of shard keys")
	}
	var out []Candidate
	for i, cn := range n.Content {
		at := fmt.Sprintf("%s[%d]", where, i)
		cand := Candidate{Line: cn.Line}
		keyNode := cn
		if cn.Kind == yaml.MappingNode {
			if _, isLong := mapGet(cn, "key"); isLong {
				_, m, err := p.fields(cn, at, "key", "zones")
				if err != nil {
					return nil, err
				}
				keyNode = m["key"]
				k, err := p.key(keyNode, at+".key", c)
				if err != nil {
					return nil, err
				}
				cand.Key = k
				if zn := m["zones"]; zn != nil {
					if cand.Zones, err = p.zones(zn, at+".zones", c, k, w); err != nil {
						return nil, err
					}
				}
				out = append(out, cand)
				continue
			}
		}
		k, err := p.key(keyNode, at, c)
		if err != nil {
			return nil, err
		}
		cand.Key = k
		out = append(out, cand)
	}
	return out, nil
}

func mapGet(n *yaml.Node, key string) (*yaml.Node, bool) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1], true
		}
	}
	return nil, false
}

// keyKinds are the shard-key field values workload files accept.
var keyKinds = map[string]sharding.KeyKind{"1": sharding.Ascending, "hashed": sharding.Hashed}

// key parses {field: 1|hashed, ...} and applies checkKey's rules field by
// field, so each error names its line: unknown field, then the value, then
// an array-valued field, then the hashed count.
func (p *parser) key(n *yaml.Node, where string, c *Collection) (sharding.Key, error) {
	order, m, err := p.fields(n, where, nil...)
	if err != nil {
		return nil, err
	}
	if len(order) == 0 {
		return nil, p.errf(n, where, "empty shard key")
	}
	var k sharding.Key
	for _, name := range order {
		v, at := m[name], join(where, name)
		msg := c.keyFieldErr(name)
		if _, known := c.fieldIdx[name]; !known {
			return nil, p.errf(v, at, "%s", msg)
		}
		kind, ok := keyKinds[v.Value]
		if !ok {
			return nil, p.errf(v, at, "want 1 or hashed, got %q (descending shard keys are not allowed)", v.Value)
		}
		if msg != "" {
			return nil, p.errf(v, at, "%s", msg)
		}
		k = append(k, sharding.KeyField{Name: name, Kind: kind})
	}
	if hashedFields(k) > 1 {
		return nil, p.errf(n, where, "%s", errTwoHashed)
	}
	return k, nil
}

func (p *parser) zones(n *yaml.Node, where string, c *Collection, k sharding.Key, w *Workload) ([]Zone, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, where, "want a list of zones, got %s", nodeKind(n))
	}
	var zones []Zone
	for i, zn := range n.Content {
		at := fmt.Sprintf("%s[%d]", where, i)
		_, m, err := p.fields(zn, at, "name", "shards", "ranges", "firehose", "roll")
		if err != nil {
			return nil, err
		}
		var z Zone
		if m["name"] == nil {
			return nil, p.errf(zn, at+".name", "required")
		}
		if z.Name, err = p.str(m["name"], at+".name"); err != nil {
			return nil, err
		}
		sn := m["shards"]
		if sn == nil || sn.Kind != yaml.SequenceNode || len(sn.Content) == 0 {
			return nil, p.errf(zn, at+".shards", "want a non-empty list of shard numbers")
		}
		for _, s := range sn.Content {
			x, err := p.int(s, at+".shards", 0)
			if err != nil {
				return nil, err
			}
			if int(x) >= w.Shards {
				return nil, p.errf(s, at+".shards", "shard %d does not exist (shards: %d, numbered from 0)", x, w.Shards)
			}
			z.Shards = append(z.Shards, int(x))
		}
		if v := m["firehose"]; v != nil {
			if z.Firehose, err = p.bool(v, at+".firehose"); err != nil {
				return nil, err
			}
			if z.Firehose && (k[0].Kind == sharding.Hashed || !c.Fields[c.fieldIdx[k[0].Name]].ascending()) {
				return nil, p.errf(v, at+".firehose", "a firehose zone needs a range key whose first field ascends (objectid, date or seq), got %s", keyPattern(k))
			}
		}
		z.Roll = z.Firehose
		if v := m["roll"]; v != nil {
			if !z.Firehose {
				return nil, p.errf(v, at+".roll", "only a firehose zone rolls")
			}
			if z.Roll, err = p.bool(v, at+".roll"); err != nil {
				return nil, err
			}
		}
		if rn := m["ranges"]; rn != nil {
			if z.Firehose {
				return nil, p.errf(rn, at+".ranges", "a firehose zone's range is [now, MaxKey), rolled daily: give no ranges")
			}
			if z.Ranges, err = p.zoneRanges(rn, at+".ranges", k); err != nil {
				return nil, err
			}
		} else if !z.Firehose {
			return nil, p.errf(zn, at+".ranges", "required (or firehose: true)")
		}
		zones = append(zones, z)
	}
	return zones, nil
}

func (p *parser) zoneRanges(n *yaml.Node, where string, k sharding.Key) ([]ZoneRange, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, where, "want a list of {min, max}, got %s", nodeKind(n))
	}
	var out []ZoneRange
	for i, rn := range n.Content {
		at := fmt.Sprintf("%s[%d]", where, i)
		_, m, err := p.fields(rn, at, "min", "max")
		if err != nil {
			return nil, err
		}
		var r ZoneRange
		for _, b := range []struct {
			name string
			dst  *[]Value
		}{{"min", &r.Min}, {"max", &r.Max}} {
			bn := m[b.name]
			if bn == nil {
				return nil, p.errf(rn, at+"."+b.name, "required")
			}
			if *b.dst, err = p.bound(bn, at+"."+b.name, k); err != nil {
				return nil, err
			}
		}
		if string(encodeBound(k, r.Min)) >= string(encodeBound(k, r.Max)) {
			return nil, p.errf(rn, at, "min must be below max")
		}
		out = append(out, r)
	}
	return out, nil
}

// bound parses a zone bound: a mapping over a prefix of the key fields whose
// values are scalars, MinKey or MaxKey.
func (p *parser) bound(n *yaml.Node, where string, k sharding.Key) ([]Value, error) {
	order, m, err := p.fields(n, where, nil...)
	if err != nil {
		return nil, err
	}
	if len(order) > len(k) {
		return nil, p.errf(n, where, "more fields than the shard key %s", keyPattern(k))
	}
	var vals []Value
	for i, name := range order {
		if name != k[i].Name {
			return nil, p.errf(n, join(where, name), "zone bounds must follow the shard key %s in order", keyPattern(k))
		}
		v := m[name]
		if k[i].Kind == sharding.Hashed && v.Value != "MinKey" && v.Value != "MaxKey" {
			// A hashed bound is the hash value itself (NumberLong).
			x, err := p.int(v, join(where, name), -1<<63)
			if err != nil {
				return nil, err
			}
			vals = append(vals, Int(x))
			continue
		}
		vals = append(vals, scalarValue(v))
	}
	return vals, nil
}

// scalarValue reads a YAML scalar as a BSON-ish value.
func scalarValue(n *yaml.Node) Value {
	switch {
	case n.Value == "MinKey":
		return Value{Kind: KindMinKey}
	case n.Value == "MaxKey":
		return Value{Kind: KindMaxKey}
	case n.Tag == "!!null":
		return Null()
	case n.Tag == "!!int":
		if x, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
			return Int(x)
		}
	case n.Tag == "!!float":
		if x, err := strconv.ParseFloat(n.Value, 64); err == nil {
			return Double(x)
		}
	case n.Tag == "!!bool":
		return Bool(n.Value == "true")
	}
	if strings.HasPrefix(n.Value, "ObjectId(") {
		if v, err := ObjectIDHex(strings.Trim(strings.TrimPrefix(n.Value, "ObjectId("), "\")'")); err == nil {
			return v
		}
	}
	return String(n.Value)
}

// SetShards overrides the shard count, refusing zones that name shards the
