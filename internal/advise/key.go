package advise

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shardmart/shardmart/internal/sharding"
)

// The advisor's shard keys are sharding.Key, the model `shardmart mongo plan`
// and `apply` shard with, so a spec variant and a workload candidate are the
// same thing to the simulator.

// SpecCandidate is the candidate for spec collection sc's shard key, checked
// against workload collection c's fields. The spec's zones are left out: the
// spec names its shards and tiers, a workload numbers them; give zones in the
// workload file.
func SpecCandidate(c *Collection, sc sharding.Collection) (Candidate, error) {
	if err := c.checkKey(sc.Key); err != nil {
		return Candidate{}, fmt.Errorf("spec %s variant %s: %w", sc.Name, sc.Variant, err)
	}
	return Candidate{Key: slices.Clone(sc.Key)}, nil
}

// keyPattern renders a key as workload files write it: {user_id: hashed, _id: 1}.
func keyPattern(k sharding.Key) string {
	parts := make([]string, len(k))
	for i, f := range k {
		switch f.Kind {
		case sharding.Hashed:
			parts[i] = f.Name + ": hashed"
		case sharding.Descending:
			parts[i] = f.Name + ": -1"
		default:
			parts[i] = f.Name + ": 1"
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// hashedFields counts k's hashed fields; MongoDB allows at most one.
func hashedFields(k sharding.Key) int {
	n := 0
	for _, f := range k {
		if f.Kind == sharding.Hashed {
			n++
		}
	}
	return n
}

// keyFieldErr says why field name of c cannot be in a shard key, "" if it can.
func (c *Collection) keyFieldErr(name string) string {
	idx, ok := c.fieldIdx[name]
	if !ok {
		return fmt.Sprintf("unknown field %q (declared: %s)", name, c.fieldNames())
	}
	if c.Fields[idx].isArray() {
		return fmt.Sprintf("field %q holds arrays: MongoDB refuses a shard key on an array field (%s)", name, c.Fields[idx].arrayWhere)
	}
	return ""
}

var errTwoHashed = errors.New("at most one hashed field per shard key")

// checkKey applies MongoDB's shard-key rules to k on c's fields; the parser
// applies the same rules field by field to name the line at fault.
func (c *Collection) checkKey(k sharding.Key) error {
	if len(k) == 0 {
		return errors.New("empty shard key")
	}
	for _, f := range k {
		if msg := c.keyFieldErr(f.Name); msg != "" {
			return fmt.Errorf("%s: %s", f.Name, msg)
		}
		if f.Kind == sharding.Descending {
			return fmt.Errorf("%s: descending shard keys are not allowed", f.Name)
		}
	}
	if hashedFields(k) > 1 {
		return errTwoHashed
	}
	return nil
}

// keyIndexes maps k's fields to their indexes in c.Fields; checkKey has
// made sure every field is there.
func (c *Collection) keyIndexes(k sharding.Key) []int {
	idx := make([]int, len(k))
	for i, f := range k {
		idx[i] = c.fieldIdx[f.Name]
	}
	return idx
}
