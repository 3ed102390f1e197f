package advise

import (
	"fmt"
	"slices"
	"strings"

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
