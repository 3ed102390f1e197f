package sharding

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

func eventsColl(t *testing.T) (Spec, Collection) {
	t.Helper()
	spec := defaultSpec(t)
	c, ok := spec.Collection("events")
	if !ok {
		t.Fatal("no events collection")
	}
	return spec, c
}

func tagDoc(ns string, r Range) bson.D {
	return bson.D{{Key: "ns", Value: ns}, {Key: "min", Value: r.Min}, {Key: "max", Value: r.Max}, {Key: "tag", Value: r.Zone}}
}

func zr(r Range, ns string) ZoneRange { return ZoneRange{NS: ns, Min: r.Min, Max: r.Max, Tag: r.Zone} }

// SHD-4: the firehose zone's daily roll.
func TestPlanRoll(t *testing.T) {
	_, c := eventsColl(t)
	ns := "shardmart.events"
	day1 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	day2 := time.Date(2026, 11, 21, 18, 45, 0, 0, time.UTC) // rolls to midnight of the 21st
	b := func(d time.Time) string { return shellValue(objectIDAt(Day(d))) }
	old := FirehoseRanges(c, day1)
	tests := []struct {
		name    string
		current []ZoneRange
		want    []string // mongosh of each command
	}{
		{"fresh collection: create both ranges", nil, []string{
			`db.adminCommand({ updateZoneKeyRange: "shardmart.events", min: { _id: MinKey }, max: { _id: ` + b(day2) + ` }, zone: "standard" })`,
			`db.adminCommand({ updateZoneKeyRange: "shardmart.events", min: { _id: ` + b(day2) + ` }, max: { _id: MaxKey }, zone: "fast" })`,
		}},
		{"yesterday's boundary: widen archive, move firehose", []ZoneRange{zr(old[0], ns), zr(old[1], ns)}, []string{
			`db.adminCommand({ updateZoneKeyRange: "shardmart.events", min: { _id: MinKey }, max: { _id: ` + b(day1) + ` }, zone: null })`,
			`db.adminCommand({ updateZoneKeyRange: "shardmart.events", min: { _id: ` + b(day1) + ` }, max: { _id: MaxKey }, zone: null })`,
			`db.adminCommand({ updateZoneKeyRange: "shardmart.events", min: { _id: MinKey }, max: { _id: ` + b(day2) + ` }, zone: "standard" })`,
			`db.adminCommand({ updateZoneKeyRange: "shardmart.events", min: { _id: ` + b(day2) + ` }, max: { _id: MaxKey }, zone: "fast" })`,
		}},
		{"no archive range below: add one from the old boundary", []ZoneRange{zr(old[1], ns)}, []string{
			`db.adminCommand({ updateZoneKeyRange: "shardmart.events", min: { _id: ` + b(day1) + ` }, max: { _id: MaxKey }, zone: null })`,
			`db.adminCommand({ updateZoneKeyRange: "shardmart.events", min: { _id: ` + b(day1) + ` }, max: { _id: ` + b(day2) + ` }, zone: "standard" })`,
			`db.adminCommand({ updateZoneKeyRange: "shardmart.events", min: { _id: ` + b(day2) + ` }, max: { _id: MaxKey }, zone: "fast" })`,
		}},
		{"already rolled today: nothing", func() []ZoneRange {
			r := FirehoseRanges(c, day2)
			return []ZoneRange{zr(r[0], ns), zr(r[1], ns)}
		}(), nil},
		{"boundary ahead: never moves back", func() []ZoneRange {
			r := FirehoseRanges(c, day2.AddDate(0, 0, 3))
			return []ZoneRange{zr(r[0], ns), zr(r[1], ns)}
		}(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps, err := PlanRoll(ns, c, tt.current, day2)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range steps {
				got = append(got, Shell("admin", s.Cmd))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestPlanRollRefuses(t *testing.T) {
	spec, c := eventsColl(t)
	orders, _ := spec.Collection("orders")
	if _, err := PlanRoll("shardmart.orders", orders, nil, planDay); !errors.Is(err, ErrNoFirehose) {
		t.Errorf("orders: err = %v, want ErrNoFirehose", err)
	}
	foreign := ZoneRange{NS: "shardmart.events", Min: bson.D{{Key: "_id", Value: bson.MinKey{}}}, Max: bson.D{{Key: "_id", Value: bson.MaxKey{}}}, Tag: "standard"}
	if _, err := PlanRoll("shardmart.events", c, []ZoneRange{foreign}, planDay); err == nil {
		t.Error("overlapping non-firehose range: got nil error")
	}
}

func TestRollIsIdempotent(t *testing.T) {
	spec, c := eventsColl(t)
	rec := newRecorder(t)
	for _, r := range FirehoseRanges(c, planDay) {
		rec.config["tags"] = append(rec.config["tags"], tagDoc("shardmart.events", r))
	}
	var out bytes.Buffer
	n, err := Roll(context.Background(), rec, spec, c, planDay.Add(5*time.Hour), false, &out)
	if err != nil || n != 0 || len(rec.writes()) != 0 {
		t.Errorf("second roll the same day: n=%d err=%v writes=%v, want nothing", n, err, rec.writes())
	}
}

// cluster returns a recorder holding what a cluster looks like after apply:
// used to check that a second apply runs nothing.
func appliedCluster(t *testing.T, spec Spec) *recorder {
	rec := newRecorder(t)
	rec.config["databases"] = []bson.D{{{Key: "_id", Value: spec.Database}}}
	for _, tier := range spec.Tiers {
		for _, sh := range tier.Shards {
			rec.config["shards"] = append(rec.config["shards"], bson.D{{Key: "_id", Value: sh}, {Key: "tags", Value: bson.A{tier.Zone}}})
		}
	}
	var firstBatch bson.A
	for _, c := range spec.Collections {
		ns := spec.Namespace(c.Name)
		rec.config["collections"] = append(rec.config["collections"], bson.D{{Key: "_id", Value: ns}, {Key: "key", Value: c.Key.Doc()}})
		for _, r := range spec.Ranges(c) {
			rec.config["tags"] = append(rec.config["tags"], tagDoc(ns, r))
		}
		firstBatch = append(firstBatch, bson.D{{Key: "key", Value: shardKeyIndex(c.Key).Key.Doc()}})
		for _, ix := range c.Indexes {
			firstBatch = append(firstBatch, bson.D{{Key: "key", Value: ix.Key.Doc()}})
		}
	}
	// One listIndexes reply listing every index is enough for the key match.
	rec.replies["listIndexes"] = []bson.D{{{Key: "cursor", Value: bson.D{{Key: "firstBatch", Value: firstBatch}}}, {Key: "ok", Value: 1.0}}}
	return rec
}

func emptyCluster(t *testing.T, spec Spec) *recorder {
	rec := newRecorder(t)
	for _, tier := range spec.Tiers {
		for _, sh := range tier.Shards {
			rec.config["shards"] = append(rec.config["shards"], bson.D{{Key: "_id", Value: sh}})
		}
	}
	rec.errs["listIndexes"] = mongo.CommandError{Code: 26, Name: "NamespaceNotFound"}
	return rec
}

// SHD-7: collections placed on shard tiers via zones.
func TestApplyEmptyClusterRunsThePlan(t *testing.T) {
	spec := defaultSpec(t)
	rec := emptyCluster(t, spec)
	var out bytes.Buffer
	res, err := Apply(context.Background(), rec, spec, &out, false)
	if err != nil {
		t.Fatal(err)
	}
	plan := Plan(spec)
	got := rec.writes()
	if len(got) != len(plan) || res.Ran != len(plan) {
		t.Fatalf("ran %d commands (result %d), want the %d of the plan", len(got), res.Ran, len(plan))
	}
	var dbs []string
	for _, s := range rec.sent {
		if s.Cmd[0].Key != "listIndexes" {
			dbs = append(dbs, s.DB)
		}
	}
	for i, s := range plan {
		if ext(t, got[i]) != ext(t, s.Cmd) || dbs[i] != s.DB {
			t.Errorf("command %d: got %s on %s, want %s on %s", i, ext(t, got[i]), dbs[i], ext(t, s.Cmd), s.DB)
		}
	}
}

func TestApplyTwiceRunsNothing(t *testing.T) {
	spec := defaultSpec(t)
	rec := appliedCluster(t, spec)
	var out bytes.Buffer
	res, err := Apply(context.Background(), rec, spec, &out, false)
	if err != nil {
		t.Fatal(err)
	}
	if w := rec.writes(); len(w) != 0 || res.Ran != 0 || res.Skipped != len(Plan(spec)) {
		t.Errorf("second apply ran %v (ran=%d skipped=%d), want nothing run and all %d skipped\n%s", w, res.Ran, res.Skipped, len(Plan(spec)), out.String())
	}
}

func TestApplyKeepsRolledFirehose(t *testing.T) {
	spec := defaultSpec(t)
	rec := appliedCluster(t, spec)
	events, _ := spec.Collection("events")
	// The daily roll has moved the boundary since the spec's FirehoseStart.
	var tags []bson.D
	for _, d := range rec.config["tags"] {
		if d[0].Value != "shardmart.events" {
			tags = append(tags, d)
		}
	}
	for _, r := range FirehoseRanges(events, planDay.AddDate(0, 0, 4)) {
		tags = append(tags, tagDoc("shardmart.events", r))
	}
	rec.config["tags"] = tags
	res, err := Apply(context.Background(), rec, spec, &bytes.Buffer{}, false)
	if err != nil || res.Ran != 0 {
		t.Errorf("apply after a roll: ran=%d err=%v, want no change to the firehose", res.Ran, err)
	}
}

func TestApplyRefusals(t *testing.T) {
	spec := defaultSpec(t)
	t.Run("shard key mismatch", func(t *testing.T) {
		rec := appliedCluster(t, spec)
		rec.config["collections"][0] = bson.D{{Key: "_id", Value: "shardmart.orders"}, {Key: "key", Value: bson.D{{Key: "user_id", Value: 1.0}}}}
		_, err := Apply(context.Background(), rec, spec, &bytes.Buffer{}, false)
		if !errors.Is(err, ErrShardKeyMismatch) {
			t.Errorf("err = %v, want ErrShardKeyMismatch", err)
		}
	})
	t.Run("unknown shard", func(t *testing.T) {
		rec := emptyCluster(t, spec)
		rec.config["shards"] = nil
		_, err := Apply(context.Background(), rec, spec, &bytes.Buffer{}, false)
		if !errors.Is(err, ErrUnknownShard) {
			t.Errorf("err = %v, want ErrUnknownShard", err)
		}
	})
	t.Run("drift is reported, not overwritten", func(t *testing.T) {
		rec := appliedCluster(t, spec)
		var tags []bson.D
		for _, d := range rec.config["tags"] {
			if d[0].Value != "shardmart.sessions" {
				tags = append(tags, d)
			}
		}
		tags = append(tags, tagDoc("shardmart.sessions", Range{
			Min: bson.D{{Key: "_id", Value: bson.MinKey{}}}, Max: bson.D{{Key: "_id", Value: int64(0)}}, Zone: "fast",
		}))
		rec.config["tags"] = tags
		res, err := Apply(context.Background(), rec, spec, &bytes.Buffer{}, false)
		if !errors.Is(err, ErrDrift) || len(res.Drift) != 1 || len(rec.writes()) != 0 {
			t.Errorf("err=%v drift=%v writes=%v, want ErrDrift, one drift, no writes", err, res.Drift, rec.writes())
		}
	})
	t.Run("8.0 unsplittable collection is not sharded", func(t *testing.T) {
		rec := appliedCluster(t, spec)
		rec.config["collections"][0] = bson.D{{Key: "_id", Value: "shardmart.orders"}, {Key: "key", Value: bson.D{{Key: "_id", Value: int32(1)}}}, {Key: "unsplittable", Value: true}}
		res, err := Apply(context.Background(), rec, spec, &bytes.Buffer{}, false)
		if err != nil || res.Ran != 1 || rec.writes()[0][0].Key != "shardCollection" {
			t.Errorf("ran=%d err=%v writes=%v, want one shardCollection", res.Ran, err, rec.writes())
		}
	})
	t.Run("dry run sends nothing", func(t *testing.T) {
		rec := emptyCluster(t, spec)
		res, err := Apply(context.Background(), rec, spec, &bytes.Buffer{}, true)
		if err != nil || len(rec.writes()) != 0 || res.Ran != len(Plan(spec)) {
			t.Errorf("dry run: err=%v writes=%d ran=%d", err, len(rec.writes()), res.Ran)
		}
	})
}

func status(mode string, inRound bool) bson.D {
	return bson.D{{Key: "mode", Value: mode}, {Key: "inBalancerRound", Value: inRound}, {Key: "numBalancerRounds", Value: int64(7)}, {Key: "ok", Value: 1.0}}
}

func TestStopBalancerWaitsForRound(t *testing.T) {
	rec := newRecorder(t)
	rec.replies["balancerStatus"] = []bson.D{status("off", true), status("off", true), status("off", false)}
	var out bytes.Buffer
	st, err := StopBalancer(context.Background(), rec, time.Minute, time.Millisecond, &out)
	if err != nil {
		t.Fatal(err)
	}
	if st.InBalancerRound || st.Enabled() {
		t.Errorf("final status %s, want off and not in a round", st)
	}
	if n := strings.Count(out.String(), "waiting for the balancing round"); n != 2 {
		t.Errorf("progress lines = %d, want 2:\n%s", n, out.String())
	}
	// The wait travels as the context deadline (the driver's maxTimeMS), never in the document.
	if got := ext(t, rec.sent[0].Cmd); got != `{"balancerStop":{"$numberInt":"1"}}` {
		t.Errorf("first command %s", got)
	}
}

func TestStopBalancerTimesOut(t *testing.T) {
	rec := newRecorder(t)
	rec.replies["balancerStatus"] = []bson.D{status("off", true)}
	_, err := StopBalancer(context.Background(), rec, 5*time.Millisecond, time.Millisecond, &bytes.Buffer{})
	if !errors.Is(err, ErrBalancerBusy) {
		t.Errorf("err = %v, want ErrBalancerBusy", err)
	}
}

// SHD-3: auto-split per server version.
func TestAutoSplitPerVersion(t *testing.T) {
	tests := []struct {
		version  string
		settings []bson.D
		noOp     bool
		enabled  bool
	}{
		{"7.0.14", nil, true, false},
		{"6.0.3", nil, true, false},
		{"6.0.2", nil, false, true},
		{"5.0.26", []bson.D{{{Key: "_id", Value: "autosplit"}, {Key: "enabled", Value: false}}}, false, false},
	}
	for _, tt := range tests {
		rec := newRecorder(t)
		rec.replies["buildInfo"] = []bson.D{{{Key: "version", Value: tt.version}, {Key: "ok", Value: 1.0}}}
		rec.config["settings"] = tt.settings
		as, err := GetAutoSplit(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		if as.NoOp != tt.noOp || as.Enabled != tt.enabled {
			t.Errorf("%s: noOp=%t enabled=%t, want %t %t", tt.version, as.NoOp, as.Enabled, tt.noOp, tt.enabled)
		}
	}
}

func TestMoveRange(t *testing.T) {
	spec := defaultSpec(t)
	products, _ := spec.Collection("products")
	books := bson.D{{Key: "category", Value: "books"}}
	run := func(t *testing.T, mode, version string, force bool) (*recorder, error) {
		rec := newRecorder(t)
		rec.replies["balancerStatus"] = []bson.D{status(mode, false)}
		rec.replies["buildInfo"] = []bson.D{{{Key: "version", Value: version}, {Key: "ok", Value: 1.0}}}
		// One chunk holds the whole collection, on shard1 (6.0+ reads it).
		uuid := bson.Binary{Subtype: 4, Data: []byte("products-uuid-16")}
		rec.config["collections"] = []bson.D{{{Key: "_id", Value: "shardmart.products"}, {Key: "uuid", Value: uuid}}}
		rec.config["chunks"] = []bson.D{{{Key: "uuid", Value: uuid}, {Key: "min", Value: FillMin(products.Key, nil)}, {Key: "max", Value: FillMax(products.Key, nil)}, {Key: "shard", Value: "shard1"}}}
		err := MoveRange(context.Background(), rec, MoveRangeRequest{NS: "shardmart.products", Collection: products, ToShard: "shard2", Min: books, Max: books, Force: force}, &bytes.Buffer{})
		return rec, err
	}
	t.Run("refused while the balancer is on", func(t *testing.T) {
		rec, err := run(t, "full", "7.0.14", false)
		if !errors.Is(err, ErrBalancerRunning) || len(rec.writes()) != 0 {
			t.Errorf("err=%v writes=%v, want ErrBalancerRunning and nothing sent", err, rec.writes())
		}
	})
	t.Run("moveRange on 6.0+", func(t *testing.T) {
		rec, err := run(t, "off", "7.0.14", false)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"moveRange":"shardmart.products","toShard":"shard2","min":{"category":"books","_id":{"$minKey":1}},"max":{"category":"books","_id":{"$maxKey":1}}}`
		if w := rec.writes(); len(w) != 1 || ext(t, w[0]) != want {
			t.Errorf("got %v\nwant %s", w, want)
		}
	})
	t.Run("moveChunk before 6.0", func(t *testing.T) {
		rec, err := run(t, "off", "5.0.26", false)
		if err != nil {
			t.Fatal(err)
		}
		if w := rec.writes(); len(w) != 1 || w[0][0].Key != "moveChunk" {
			t.Errorf("got %v, want one moveChunk", w)
		}
	})
	t.Run("moveChunk before 6.0 on a hashed key needs bounds", func(t *testing.T) {
		orders, _ := spec.Collection("orders")
		rec := newRecorder(t)
		rec.replies["balancerStatus"] = []bson.D{status("off", false)}
		rec.replies["buildInfo"] = []bson.D{{{Key: "version", Value: "5.0.26"}, {Key: "ok", Value: 1.0}}}
		err := MoveRange(context.Background(), rec, MoveRangeRequest{NS: "shardmart.orders", Collection: orders, ToShard: "shard2", Min: bson.D{{Key: "user_id", Value: int64(-154124144)}}}, &bytes.Buffer{})
		if !errors.Is(err, ErrMoveChunkBounds) || len(rec.writes()) != 0 {
			t.Errorf("err=%v writes=%v, want ErrMoveChunkBounds and nothing sent", err, rec.writes())
		}
	})
	t.Run("force overrides", func(t *testing.T) {
		if _, err := run(t, "full", "7.0.14", true); err != nil {
			t.Errorf("force: %v", err)
		}
	})
}
