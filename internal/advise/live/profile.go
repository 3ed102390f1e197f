package live

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// ProfileSample is what the database profiler saw on the collection during the window.
type ProfileSample struct {
	Window  time.Duration
	Entries int          // profiler entries of the collection read (at most findLimit)
	Ops     []ProfiledOp // by type and equality-filter fields, most frequent first
	Other   int64        // entries not modelled (getMore, commands other than aggregate)
	Level   ProfileLevel // the level found, and restored afterwards
}

// ProfiledOp is one operation shape: its type and the fields its filter compares by equality.
type ProfiledOp struct {
	Type   string   `json:"type"` // insert, find, update, delete (the advisor's operation types)
	Filter []string `json:"filter"`
	Count  int64    `json:"count"`
}

// ProfileLevel is the profiler setting of a database. slowms and sampleRate are server-wide
// (they also decide what the slow-query log records); level and filter are the database's.
type ProfileLevel struct {
	Level      int32    `json:"level"`
	SlowMS     int32    `json:"slowms"`
	SampleRate float64  `json:"sampleRate"`
	Filter     bson.Raw `json:"-"` // nil when none is set
}

// command is the profile command that puts the setting back; a missing filter is unset.
func (l ProfileLevel) command() bson.D {
	var filter any = "unset"
	if l.Filter != nil {
		filter = l.Filter
	}
	return bson.D{{Key: "profile", Value: l.Level}, {Key: "slowms", Value: l.SlowMS},
		{Key: "sampleRate", Value: l.SampleRate}, {Key: "filter", Value: filter}}
}

// profileSample switches the profiler of db to level 2 for d, switches it back to the setting
// it found (also when ctx ends, the wait fails or the switch itself fails: a reply lost after
// the server applied it), then reads what it recorded on db.coll. A database already at level 2
// is refused: another run may be sampling it, and "restoring" would leave level 2 on for good.
func profileSample(ctx context.Context, src Source, db, coll string, d time.Duration, wait func(context.Context, time.Duration) error) (p *ProfileSample, err error) {
	raw, err := src.RunCommand(ctx, db, bson.D{{Key: "profile", Value: int32(-1)}})
	if err != nil {
		return nil, unauthorized(err, "read the profiler level of "+db)
	}
	prev := ProfileLevel{SlowMS: 100, SampleRate: 1}
	if v, ok := raw.Lookup("was").AsInt64OK(); ok {
		prev.Level = int32(v)
	}
	if v, ok := raw.Lookup("slowms").AsInt64OK(); ok {
		prev.SlowMS = int32(v)
	}
	if v, ok := raw.Lookup("sampleRate").AsFloat64OK(); ok {
		prev.SampleRate = v
	}
	if f, ok := raw.Lookup("filter").DocumentOK(); ok {
		prev.Filter = slices.Clone(f)
	}
	if prev.Level == 2 {
		return nil, &Refusal{Msg: fmt.Sprintf("the profiler of %s is already at level 2 (another sample running, or left on): not sampling, nothing changed", db)}
	}
	// The window starts at the server's clock: entries from before it (slow operations the
	// previous level recorded) are not part of the sample.
	start := time.Now()
	if hello, err := src.RunCommand(ctx, "admin", bson.D{{Key: "hello", Value: int32(1)}}); err == nil {
		if t, ok := hello.Lookup("localTime").TimeOK(); ok {
			start = t
		}
	}
	restored := false
	restore := func() error {
		if restored {
			return nil
		}
		restored = true
		// Restore even when ctx is done: the profiler must not stay on.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := src.RunCommand(rctx, db, prev.command()); err != nil {
			return fmt.Errorf("restore the profiler of %s to level %d: %w", db, prev.Level, err)
		}
		return nil
	}
	// Armed before the switch: an error (a timeout) after the server applied level 2 must not
	// leave it on.
	defer func() {
		if rerr := restore(); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	if _, err := src.RunCommand(ctx, db, bson.D{{Key: "profile", Value: int32(2)}, {Key: "sampleRate", Value: 1.0}, {Key: "filter", Value: "unset"}}); err != nil {
		return nil, unauthorized(err, "switch the profiler of "+db+" on")
	}
	if wait == nil {
		wait = sleep
	}
	if err := wait(ctx, d); err != nil {
		return nil, err
	}
	if err := restore(); err != nil {
		return nil, err
	}
	entries, err := src.Find(ctx, db, "system.profile", bson.D{
		{Key: "ns", Value: db + "." + coll}, {Key: "ts", Value: bson.D{{Key: "$gte", Value: start}}}})
	if err != nil {
		return nil, unauthorized(err, "read "+db+".system.profile")
	}
	p = &ProfileSample{Window: d, Entries: len(entries), Level: prev}
	shapes := map[string]*ProfiledOp{}
	for _, e := range entries {
		typ, filter, n := classify(e)
		if typ == "" {
			p.Other++
			continue
		}
		id := typ + " " + strings.Join(filter, ",")
		if shapes[id] == nil {
			shapes[id] = &ProfiledOp{Type: typ, Filter: filter}
		}
		shapes[id].Count += n
	}
	for _, op := range shapes {
		p.Ops = append(p.Ops, *op)
	}
	slices.SortFunc(p.Ops, func(a, b ProfiledOp) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Type+strings.Join(a.Filter, ","), b.Type+strings.Join(b.Filter, ","))
	})
	return p, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// classify maps a profiler entry to an operation type, the fields its filter compares by
// equality, and how many operations it stands for. Unmodelled entries return "".
func classify(e bson.Raw) (typ string, filter []string, n int64) {
	op, _ := e.Lookup("op").StringValueOK()
	cmd, _ := e.Lookup("command").DocumentOK()
	switch op {
	case "insert":
		n = 1
		if v, ok := e.Lookup("ninserted").AsInt64OK(); ok && v > 0 {
			n = v
		}
		return "insert", nil, n
	case "query":
		f, _ := cmd.Lookup("filter").DocumentOK()
		return "find", equalityFields(f), 1
	case "update":
		f, _ := cmd.Lookup("q").DocumentOK()
		return "update", equalityFields(f), 1
	case "remove":
		f, _ := cmd.Lookup("q").DocumentOK()
		return "delete", equalityFields(f), 1
	case "command":
		if _, ok := cmd.Lookup("aggregate").StringValueOK(); !ok {
			return "", nil, 0
		}
		stages, _ := cmd.Lookup("pipeline").ArrayOK()
		vals, _ := stages.Values()
		if len(vals) > 0 {
			if st, ok := vals[0].DocumentOK(); ok {
				if m, ok := st.Lookup("$match").DocumentOK(); ok {
					return "find", equalityFields(m), 1
				}
			}
		}
		return "find", nil, 1
	}
	return "", nil, 0
}

// equalityFields lists the top-level fields f compares by equality ({a: 1} or {a: {$eq: 1}}),
// sorted; ranges, $in and operators leave a field out, as they do not target one shard.
func equalityFields(f bson.Raw) []string {
	els, _ := f.Elements()
	var out []string
	for _, el := range els {
		k := el.Key()
		if strings.HasPrefix(k, "$") {
			continue
		}
		if sub, ok := el.Value().DocumentOK(); ok {
			first, err := sub.IndexErr(0)
			if err == nil && strings.HasPrefix(first.Key(), "$") {
				if first.Key() != "$eq" {
					continue
				}
			}
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
