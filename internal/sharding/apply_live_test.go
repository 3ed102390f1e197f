package sharding_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/mongodb/shardtest"
	"github.com/shardmart/shardmart/internal/sharding"
)

// liveSpec is the full spec on a fresh database, tier "fast" on sh0 and "standard" on sh1;
// sh2 serves no zone, like deploy/mongodb's third shard.
func liveSpec(t *testing.T, now time.Time) sharding.Spec {
	t.Helper()
	spec, err := sharding.NewSpec(sharding.Options{
		Database: liveDB(t), Now: now,
		Tiers: map[string][]string{"fast": {"sh0"}, "standard": {"sh1"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// SHD-1, SHD-7: apply runs the plan on a real config server and shards; what it prints as run
// is in the cluster's metadata afterwards, and a second apply changes nothing.
func TestApplyCreatesWhatItPrintsAndSecondApplyChangesNothing(t *testing.T) {
	r := cluster(t)
	ctx := eventually.Context(t, 2*time.Minute)
	spec := liveSpec(t, time.Now())

	var out bytes.Buffer
	first, err := sharding.Apply(ctx, r, spec, &out, false)
	if err != nil {
		t.Fatalf("first apply: %v\n%s", err, out.String())
	}
	printed := strings.Count(out.String(), "\nran    ") + boolInt(strings.HasPrefix(out.String(), "ran    "))
	steps := sharding.Plan(spec)
	if first.Ran != printed || first.Ran == 0 {
		t.Errorf("apply says it ran %d, printed %d ran lines", first.Ran, printed)
	}
	// Zones of earlier tests may already hold these shards; everything else is new.
	if first.Ran+first.Skipped != len(steps) {
		t.Errorf("ran %d + skipped %d, plan has %d steps", first.Ran, first.Skipped, len(steps))
	}
	for _, s := range steps {
		if !strings.Contains(out.String(), s.Shell()) {
			t.Errorf("apply did not print step %s", s.Shell())
		}
	}

	checkDatabase(ctx, t, r, spec.Database)
	for _, tier := range spec.Tiers {
		for _, sh := range tier.Shards {
			if !slices.Contains(shardZones(ctx, t, r, sh), tier.Zone) {
				t.Errorf("shard %s not in zone %q", sh, tier.Zone)
			}
		}
	}
	for _, c := range spec.Collections {
		ns := spec.Namespace(c.Name)
		info, err := r.Collection(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Sharded || sharding.ShellValue(info.Key) != sharding.ShellValue(c.Key.Doc()) {
			t.Errorf("%s: sharded=%t key %s, want %s", ns, info.Sharded, sharding.ShellValue(info.Key), c.Key)
			continue
		}
		for _, owner := range info.Owners() {
			have := indexKeys(ctx, t, r, owner, ns)
			for _, ix := range c.Indexes {
				if !slices.Contains(have, sharding.ShellValue(ix.Key.Doc())) {
					t.Errorf("%s on %s: no index %s (have %v)", ns, owner, ix.Key, have)
				}
			}
		}
		ranges, err := sharding.ListZoneRanges(ctx, r, ns)
		if err != nil {
			t.Fatal(err)
		}
		want := spec.Ranges(c)
		if len(ranges) != len(want) {
			t.Errorf("%s: %d zone ranges in config.tags, spec has %d", ns, len(ranges), len(want))
		}
		for _, w := range want {
			if !slices.ContainsFunc(ranges, func(z sharding.ZoneRange) bool {
				return z.Tag == w.Zone && sharding.ShellValue(z.Min) == sharding.ShellValue(w.Min) && sharding.ShellValue(z.Max) == sharding.ShellValue(w.Max)
			}) {
				t.Errorf("%s: range %s..%s on %q missing from config.tags", ns, sharding.ShellValue(w.Min), sharding.ShellValue(w.Max), w.Zone)
			}
		}
	}

	out.Reset()
	second, err := sharding.Apply(ctx, r, spec, &out, false)
	if err != nil {
		t.Fatalf("second apply: %v\n%s", err, out.String())
	}
	if second.Ran != 0 || len(second.Drift) != 0 || second.Skipped != len(steps) {
		t.Errorf("second apply: ran %d, skipped %d of %d, drift %v\n%s", second.Ran, second.Skipped, len(steps), second.Drift, out.String())
	}
	t.Logf("first apply ran %d of %d steps; second skipped all", first.Ran, len(steps))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func checkDatabase(ctx context.Context, t *testing.T, r *shardtest.Router, db string) {
	t.Helper()
	docs, err := r.Find(ctx, "config", "databases", bson.D{{Key: "_id", Value: db}})
	if err != nil || len(docs) != 1 {
		t.Fatalf("config.databases %s: %d documents, %v", db, len(docs), err)
	}
}

func shardZones(ctx context.Context, t *testing.T, r *shardtest.Router, shard string) []string {
	t.Helper()
	docs, err := r.Find(ctx, "config", "shards", bson.D{{Key: "_id", Value: shard}})
	if err != nil || len(docs) != 1 {
		t.Fatalf("config.shards %s: %d documents, %v", shard, len(docs), err)
	}
	var sh struct {
		Tags []string `bson:"tags"`
	}
	if err := bson.Unmarshal(docs[0], &sh); err != nil {
		t.Fatal(err)
	}
	return sh.Tags
}

// indexKeys lists the index keys of ns as the shard itself reports them.
func indexKeys(ctx context.Context, t *testing.T, r *shardtest.Router, shard, ns string) []string {
	t.Helper()
	db, coll, _ := strings.Cut(ns, ".")
	cur, err := r.Shards[shard].Database(db).Collection(coll).Indexes().List(ctx)
	if err != nil {
		t.Fatalf("listIndexes %s on %s: %v", ns, shard, err)
	}
	var ixs []struct {
		Key bson.D `bson:"key"`
	}
	if err := cur.All(ctx, &ixs); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ix := range ixs {
		out = append(out, sharding.ShellValue(ix.Key))
	}
	return out
}
