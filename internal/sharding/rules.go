package sharding

import (
	"fmt"
	"slices"
)

// Severity grades a rule finding: errors stop apply, warnings are printed.
type Severity string

const (
	SevError   Severity = "error"
	SevWarning Severity = "warning"
	SevInfo    Severity = "info"
)

// Finding is one result of the SHD-6 shard-key rule checks.
type Finding struct {
	Collection string
	Rule       string
	Severity   Severity
	Detail     string
}

func (f Finding) String() string {
	return fmt.Sprintf("%s: %s [%s] %s", f.Severity, f.Collection, f.Rule, f.Detail)
}

// Check applies the chapter's shard-key rules (SHD-6) to the spec: no array
// fields, enough cardinality, no unmitigated monotonic key, multi-hotspot
// keys, nullable keys, skewed values, and zones that name tiers with shards.
func Check(spec Spec) []Finding {
	var out []Finding
	add := func(c Collection, rule string, sev Severity, format string, args ...any) {
		out = append(out, Finding{Collection: c.Name, Rule: rule, Severity: sev, Detail: fmt.Sprintf(format, args...)})
	}
	zones := map[string]int{}
	for _, t := range spec.Tiers {
		zones[t.Zone] = len(t.Shards)
	}
	for _, c := range spec.Collections {
		if len(c.Key) == 0 {
			add(c, "key", SevError, "no shard key")
			continue
		}
		if n := len(slices.DeleteFunc(slices.Clone(c.Key), func(f KeyField) bool { return f.Kind != Hashed })); n > 1 {
			add(c, "key", SevError, "%d hashed fields: a shard key may hash only one field", n)
		}
		first := c.Key[0]
		last := c.Key[len(c.Key)-1]
		for i, f := range c.Key {
			tr := c.Traits[f.Name]
			if tr.Array {
				add(c, "no-arrays", SevError, "%s may hold an array: shardCollection fails and such documents cannot be inserted", f.Name)
			}
			switch {
			case tr.Nullable && i == len(c.Key)-1:
				add(c, "nullable", SevWarning, "%s is null for many documents (e.g. guests): they all share one key value and one chunk", f.Name)
			case tr.Nullable:
				add(c, "nullable", SevWarning, "%s is null for many documents (e.g. guests): later key fields split them into chunks, but their writes share one key range (a hotspot)", f.Name)
			}
		}
		firstTr := c.Traits[first.Name]
		switch {
		case len(c.Key) == 1 && firstTr.LowCardinality:
			add(c, "cardinality", SevWarning, "%s has few distinct values: at most that many chunks, each unsplittable; add a high-cardinality field after it", first.Name)
		case first.Kind == Hashed && firstTr.LowCardinality:
			add(c, "cardinality", SevWarning, "hashing low-cardinality %s does not add values", first.Name)
		}
		if first.Kind != Hashed && firstTr.Monotonic {
			if c.Firehose != nil {
				add(c, "monotonic", SevInfo, "%s grows with time; every insert lands in the open-ended range, pinned to zone %q (firehose) and rolled daily; write capacity is one shard's", first.Name, c.Firehose.Zone)
			} else {
				add(c, "monotonic", SevWarning, "%s grows with time: every insert goes to the MaxKey chunk on one shard; hash it or use a firehose zone", first.Name)
			}
		}
		if len(c.Key) > 1 && first.Kind != Hashed && firstTr.LowCardinality && c.Traits[c.Key[1].Name].Monotonic {
			add(c, "multi-hotspot", SevInfo, "{%s, %s}: one ascending hotspot per %s value, spread over shards; good while values outnumber shards, uneven when few values dominate", first.Name, c.Key[1].Name, first.Name)
		}
		if tr := c.Traits[last.Name]; tr.Skewed {
			add(c, "skew", SevWarning, "a single heavy %s value cannot be split across chunks (jumbo chunk risk)", last.Name)
		}
		for _, r := range spec.Ranges(c) {
			if n, ok := zones[r.Zone]; !ok || n == 0 {
				add(c, "zones", SevError, "zone %q has no shards: the balancer would have nowhere to put its ranges", r.Zone)
			}
		}
		if c.Firehose != nil && (first.Name != c.Firehose.Field || first.Kind == Hashed) {
			add(c, "firehose", SevError, "firehose field %s must be the first, ascending shard-key field", c.Firehose.Field)
		}
	}
	return out
}

// Errors keeps the error-severity findings.
func Errors(fs []Finding) []Finding {
	return slices.DeleteFunc(slices.Clone(fs), func(f Finding) bool { return f.Severity != SevError })
}
