package sharding

import (
	"fmt"
	"io"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Action says what a step does, so apply knows which state to read first.
type Action string

const (
	ActEnableSharding  Action = "enableSharding"
	ActAddShardToZone  Action = "addShardToZone"
	ActZoneRange       Action = "updateZoneKeyRange"
	ActCreateIndex     Action = "createIndexes"
	ActShardCollection Action = "shardCollection"
)

// Step is one command of the plan, with what apply needs to skip it when the
// cluster already has it.
type Step struct {
	Action  Action
	DB      string // "admin" or the spec database (createIndexes)
	Cmd     bson.D
	Comment string

	Shard, Zone string     // addShardToZone
	Collection  Collection // ranges, indexes, shardCollection
	NS          string
	Range       Range // updateZoneKeyRange
	Index       Index // createIndexes
}

// Shell is the step as mongosh source.
func (s Step) Shell() string { return Shell(s.DB, s.Cmd) }

// shardKeyIndex is the index backing the shard key, named the way
// createIndex names it by default so a seed-created index is recognised.
func shardKeyIndex(k Key) Index {
	parts := make([]string, 0, len(k))
	for _, f := range k {
		v := "1"
		switch f.Kind {
		case Hashed:
			v = "hashed"
		case Descending:
			v = "-1"
		}
		parts = append(parts, f.Name+"_"+v)
	}
	return Index{Name: strings.Join(parts, "_"), Key: k, Why: "shard key"}
}

// Plan lists, in order, every command apply runs against an empty cluster:
// database, shard zones, zone ranges (before sharding, so an empty
// collection's initial chunks are created in their zones), indexes, then
// shardCollection. Apply runs the same steps, skipping what already exists.
func Plan(spec Spec) []Step {
	steps := []Step{{
		Action: ActEnableSharding, DB: "admin", Cmd: EnableShardingCmd(spec.Database),
		Comment: "create the database (sh.enableSharding(\"somedb\"): not required since 6.0, harmless)",
	}}
	for _, t := range spec.Tiers {
		for _, sh := range t.Shards {
			steps = append(steps, Step{
				Action: ActAddShardToZone, DB: "admin", Cmd: AddShardToZoneCmd(sh, t.Zone),
				Shard: sh, Zone: t.Zone, Comment: fmt.Sprintf("tier %q served by shard %q (SHD-7)", t.Zone, sh),
			})
		}
	}
	for _, c := range spec.Collections {
		ns := spec.Namespace(c.Name)
		for _, r := range spec.Ranges(c) {
			steps = append(steps, Step{
				Action: ActZoneRange, DB: "admin", Cmd: UpdateZoneKeyRangeCmd(ns, r),
				Collection: c, NS: ns, Range: r,
				Comment: fmt.Sprintf("%s: %s..%s on zone %q (full shard-key prefix)", c.Name, shellValue(r.Min), shellValue(r.Max), r.Zone),
			})
		}
		ixs := c.Indexes
		if !docsEqual(c.Key.Doc(), bson.D{{Key: "_id", Value: int32(1)}}) {
			// {_id: 1} is served by the built-in _id index.
			ixs = append([]Index{shardKeyIndex(c.Key)}, ixs...)
		}
		for _, ix := range ixs {
			steps = append(steps, Step{
				Action: ActCreateIndex, DB: spec.Database, Cmd: CreateIndexesCmd(c.Name, ix),
				Collection: c, NS: ns, Index: ix, Comment: fmt.Sprintf("%s index %s: %s", c.Name, ix.Name, ix.Why),
			})
		}
		steps = append(steps, Step{
			Action: ActShardCollection, DB: "admin", Cmd: ShardCollectionCmd(ns, c.Key),
			Collection: c, NS: ns, Comment: fmt.Sprintf("%s on %s [%s]: %s", c.Name, c.Key, c.Variant, c.Why),
		})
	}
	return steps
}

// WritePlan prints the plan as a mongosh script a DBA can review and paste.
func WritePlan(w io.Writer, spec Spec, steps []Step) error {
	var b strings.Builder
	fmt.Fprintf(&b, "// shardmart sharding plan for database %q: %d commands, run against a mongos.\n", spec.Database, len(steps))
	fmt.Fprintf(&b, "// `shardmart mongo apply` sends exactly these documents, skipping what already exists.\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "\n// %s\n%s\n", s.Comment, s.Shell())
	}
	_, err := io.WriteString(w, b.String())
	return err
}
