package advise

import (
	"fmt"

	"github.com/shardmart/shardmart/internal/sharding"
	"gopkg.in/yaml.v3"
)

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
