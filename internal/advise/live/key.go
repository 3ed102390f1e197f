package live

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/shardmart/shardmart/internal/sharding"
)

// ParseKey reads a candidate key as workload files and the shell write it:
// {user_id: hashed}, {category: 1, _id: 1}, { user_id: "hashed" }.
func ParseKey(s string) (sharding.Key, error) {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(s), &n); err != nil || len(n.Content) != 1 || n.Content[0].Kind != yaml.MappingNode || len(n.Content[0].Content) == 0 {
		return nil, fmt.Errorf("candidate %q: want a key such as {user_id: hashed} or {category: 1, _id: 1}", s)
	}
	m := n.Content[0].Content
	var k sharding.Key
	for i := 0; i < len(m); i += 2 {
		f := sharding.KeyField{Name: m[i].Value}
		switch strings.ToLower(m[i+1].Value) {
		case "hashed":
			f.Kind = sharding.Hashed
		case "1":
			f.Kind = sharding.Ascending
		default:
			return nil, fmt.Errorf("candidate %q: field %s: want 1 or hashed, got %q", s, f.Name, m[i+1].Value)
		}
		k = append(k, f)
	}
	return k, nil
}
