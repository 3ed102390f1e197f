package sharding

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FirehoseRanges are a firehose collection's two zone ranges for boundary b:
// [MinKey, b) on the archive zone and the open-ended [b, MaxKey) on the
// firehose zone, both over the full shard key.
func FirehoseRanges(c Collection, b time.Time) []Range {
	f := c.Firehose
	bound := bson.D{{Key: f.Field, Value: f.Boundary(b)}}
	return []Range{
		{Min: FillMin(c.Key, nil), Max: FillMin(c.Key, bound), Zone: f.Archive},
		{Min: FillMin(c.Key, bound), Max: FillMax(c.Key, nil), Zone: f.Zone},
	}
}

// ZoneRange is one document of config.tags.
type ZoneRange struct {
	NS  string `bson:"ns"`
	Min bson.D `bson:"min"`
	Max bson.D `bson:"max"`
	Tag string `bson:"tag"`
}

// Range converts the stored form to a spec Range.
func (z ZoneRange) Range() Range { return Range{Min: z.Min, Max: z.Max, Zone: z.Tag} }

// ErrNoFirehose means the collection has no firehose in the spec.
var ErrNoFirehose = errors.New("collection has no firehose zone")

// RollStep is one command of a firehose roll.
type RollStep struct {
	Comment string
	Cmd     bson.D
}

// PlanRoll works out the commands that move the open-ended firehose range of
// c to boundary day(at), given the collection's current config.tags ranges.
// It is idempotent: when the boundary is already at or past the target it
// returns no steps, and it never moves the boundary backwards. It does not
// write config.tags directly, as the chapter's db.tags.save(zone) does: that
// bypasses the config server's checks; updateZoneKeyRange is the supported way.
func PlanRoll(ns string, c Collection, current []ZoneRange, at time.Time) ([]RollStep, error) {
	f := c.Firehose
	if f == nil {
		return nil, fmt.Errorf("%s: %w", ns, ErrNoFirehose)
	}
	target := FirehoseRanges(c, Day(at))
	newB := target[1].Min
	top := FillMax(c.Key, nil)
	var open, below *ZoneRange
	for i := range current {
		r := &current[i]
		if r.Tag == f.Zone && docsEqual(r.Max, top) {
			open = r
		}
	}
	if open == nil {
		// No firehose yet: create both ranges, as apply would on a fresh cluster.
		for _, r := range current {
			if overlaps(c.Key, r.Range(), target[0]) || overlaps(c.Key, r.Range(), target[1]) {
				return nil, fmt.Errorf("%s: no open-ended %q range, and existing range %s..%s (%s) overlaps the one to create: remove it first",
					ns, f.Zone, shellValue(r.Min), shellValue(r.Max), r.Tag)
			}
		}
		return []RollStep{
			{Comment: "archive zone below the boundary", Cmd: UpdateZoneKeyRangeCmd(ns, target[0])},
			{Comment: "open-ended firehose range from the boundary", Cmd: UpdateZoneKeyRangeCmd(ns, target[1])},
		}, nil
	}
	if compareKeys(open.Min, newB) >= 0 {
		return nil, nil // already rolled today (or ahead): nothing to do
	}
	for i := range current {
		r := &current[i]
		if r.Tag == f.Archive && docsEqual(r.Max, open.Min) {
			below = r
		}
	}
	archive := Range{Min: open.Min, Max: newB, Zone: f.Archive}
	var steps []RollStep
	if below != nil {
		// Widen the archive range instead of adding one range per day.
		archive.Min = below.Min
		steps = append(steps, RollStep{Comment: "remove the archive range ending at the old boundary", Cmd: RemoveZoneKeyRangeCmd(ns, below.Min, below.Max)})
	}
	steps = append(steps,
		RollStep{Comment: "remove the open-ended firehose range at the old boundary", Cmd: RemoveZoneKeyRangeCmd(ns, open.Min, open.Max)},
		RollStep{Comment: "archive everything below the new boundary", Cmd: UpdateZoneKeyRangeCmd(ns, archive)},
		RollStep{Comment: "firehose from the new boundary to MaxKey", Cmd: UpdateZoneKeyRangeCmd(ns, Range{Min: newB, Max: top, Zone: f.Zone})},
	)
	return steps, nil
}

// overlaps reports whether [a.Min, a.Max) and [b.Min, b.Max) intersect.
func overlaps(_ Key, a, b Range) bool {
	return compareKeys(a.Min, b.Max) < 0 && compareKeys(b.Min, a.Max) < 0
}

// compareKeys orders two full shard-key documents field by field, for the
// value types zone bounds use here: MinKey < numbers < strings < ObjectId <
// dates < MaxKey (MongoDB's BSON comparison order for these types).
func compareKeys(a, b bson.D) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := compareValues(a[i].Value, b[i].Value); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

func typeRank(v any) int {
	switch v.(type) {
	case bson.MinKey:
		return 0
	case nil:
		return 1
	case int32, int64, float64, int:
		return 2
	case string:
		return 3
	case bson.ObjectID:
		return 4
	case bool:
		return 5
	case bson.DateTime, time.Time:
		return 6
	case bson.MaxKey:
		return 9
	}
	return 7
}

func compareValues(a, b any) int {
	ra, rb := typeRank(a), typeRank(b)
	if ra != rb {
		return ra - rb
	}
	switch x := a.(type) {
	case int32, int64, float64, int:
		// Hashed bounds are NumberLongs near ±2^63, where float64 rounds to 1024: compare
		// two integers exactly.
		if ia, ok := integer(x); ok {
			if ib, ok := integer(b); ok {
				return cmp.Compare(ia, ib)
			}
		}
		fa, fb := number(x), number(b)
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	case string:
		y := b.(string)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case bson.ObjectID:
		y := b.(bson.ObjectID)
		return bytes.Compare(x[:], y[:])
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case bson.DateTime, time.Time:
		ta, tb := asTime(a), asTime(b)
		return ta.Compare(tb)
	}
	return 0
}

func asTime(v any) time.Time {
	if d, ok := v.(bson.DateTime); ok {
		return d.Time()
	}
	return v.(time.Time)
}

func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case int:
		return int64(x), true
	}
	return 0, false
}

func number(v any) float64 {
	switch x := v.(type) {
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case int:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// docsEqual compares two documents field by field, numbers by value (the
// legacy shell stored 1 as a double, mongosh as an int32).
func docsEqual(a, b bson.D) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key {
			return false
		}
		if sa, ok := a[i].Value.(string); ok {
			if sb, ok := b[i].Value.(string); !ok || sa != sb {
				return false
			}
			continue
		}
		if da, ok := a[i].Value.(bson.D); ok {
			db, ok := b[i].Value.(bson.D)
			if !ok || !docsEqual(da, db) {
				return false
			}
			continue
		}
		if typeRank(a[i].Value) != typeRank(b[i].Value) || compareValues(a[i].Value, b[i].Value) != 0 {
			return false
		}
	}
	return true
}

// CompareKeys orders two shard-key documents the way the server orders chunk bounds (MinKey
// and MaxKey included); routing test data to the owning chunk needs the same order.
func CompareKeys(a, b bson.D) int { return compareKeys(a, b) }
