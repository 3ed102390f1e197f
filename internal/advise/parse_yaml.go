package advise

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// errf is an input error at n's line (0 without a node).
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

func mapGet(n *yaml.Node, key string) (*yaml.Node, bool) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1], true
		}
	}
	return nil, false
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
