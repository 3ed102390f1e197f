package sharding_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/sharding"
)

// SHD-3, SHD-7: a category's range assigned to a zone ends on that zone's shard, moved there by
// the real balancer, which also undoes a manual move out of the zone; once the range is
// removed the category stays where it is put.
func TestZoneRangePinsCategoryToItsShardUntilRemoved(t *testing.T) {
	r := cluster(t)
	ctx := eventually.Context(t, settleTimeout+time.Minute)
	db := liveDB(t)
	ns := db + ".products"
	products := sharding.Collection{Name: "products", Key: sharding.Key{{Name: "category"}, {Name: "_id"}}}
	shardColl(ctx, t, r, ns, products.Key.Doc())
	home := primaryShard(ctx, t, r, db)
	zoneShard := otherShard(r, home)
	zone := "z_" + db // zones are cluster-wide: one of its own

	balancerOff(ctx, t, r)
	cats := []string{"books", "games", "toys"}
	place(ctx, t, r, ns, docs(1500, 500, func(i int) bson.D {
		return bson.D{{Key: "category", Value: cats[i%3]}, {Key: "_id", Value: int64(i)}}
	}))
	books := bson.D{{Key: "category", Value: "books"}}
	if n := countOn(ctx, t, r, zoneShard, ns, books); n != 0 {
		t.Fatalf("%s holds %d books before the zone exists", zoneShard, n)
	}

	rng, err := sharding.ZoneRangeFor(products, books, books, zone)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := sharding.RunLogged(ctx, r, &out,
		sharding.AddShardToZoneCmd(zoneShard, zone), sharding.UpdateZoneKeyRangeCmd(ns, rng)); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Cleanup(func() {
		_, _ = r.RunCommand(context.Background(), "admin", sharding.RemoveShardFromZoneCmd(zoneShard, zone))
	})
	balancerOn(ctx, t, r)
	settle(ctx, t, r, ns)

	if n := countOn(ctx, t, r, zoneShard, ns, books); n != 500 {
		t.Errorf("%s (zone %s) holds %d of 500 books", zoneShard, zone, n)
	}
	for _, sh := range r.ShardIDs() {
		if sh != zoneShard {
			if n := countOn(ctx, t, r, sh, ns, books); n != 0 {
				t.Errorf("%s, outside the zone, still holds %d books", sh, n)
			}
		}
	}
	info, err := r.Collection(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range info.Chunks {
		inZone := sharding.CompareKeys(ch.Min, rng.Min) >= 0 && sharding.CompareKeys(ch.Max, rng.Max) <= 0
		if inZone && ch.Shard != zoneShard {
			t.Errorf("chunk %s..%s of the zone range is on %s", sharding.ShellValue(ch.Min), sharding.ShellValue(ch.Max), ch.Shard)
		}
	}

	// The server lets a manual move break a zone (6.0 checks no zones in moveRange): the
	// balancer reports the violation and moves the range back: the known risk that the
	// balancer reshuffles manual placement.
	balancerOff(ctx, t, r)
	move := sharding.MoveRangeRequest{NS: ns, Collection: products, ToShard: home, Min: books, Max: books}
	if err := sharding.MoveRange(ctx, r, move, &out); err != nil {
		t.Fatalf("manual move out of the zone: %v\n%s", err, out.String())
	}
	if c, err := r.Compliance(ctx, ns); err != nil || c.Compliant || c.Violation != "zoneViolation" {
		t.Errorf("after moving books out of their zone: %+v, %v; want a zoneViolation", c, err)
	}
	balancerOn(ctx, t, r)
	settle(ctx, t, r, ns)
	if n := countOn(ctx, t, r, zoneShard, ns, books); n != 500 {
		t.Errorf("the balancer brought back %d of 500 books to the zone shard %s", n, zoneShard)
	}

	// Released: once the range is removed, books may live anywhere.
	if err := sharding.RunLogged(ctx, r, &out, sharding.RemoveZoneKeyRangeCmd(ns, rng.Min, rng.Max)); err != nil {
		t.Fatal(err)
	}
	if rs, err := sharding.ListZoneRanges(ctx, r, ns); err != nil || len(rs) != 0 {
		t.Fatalf("config.tags after removal: %v, %v", rs, err)
	}
	balancerOff(ctx, t, r)
	if err := sharding.MoveRange(ctx, r, move, &out); err != nil {
		t.Fatalf("move after the range was removed: %v\n%s", err, out.String())
	}
	if c, err := r.Compliance(ctx, ns); err != nil || c.Violation == "zoneViolation" {
		t.Errorf("after the range was removed: %+v, %v; want no zoneViolation", c, err)
	}
	balancerOn(ctx, t, r)
	settle(ctx, t, r, ns)
	if n := countOn(ctx, t, r, home, ns, books); n != 500 {
		t.Errorf("%s holds %d of 500 books after the released range was moved there and the balancer ran", home, n)
	}
}

// SHD-4: the firehose zone pins the newest key range to the fast shard; after the daily roll
// the balancer moves yesterday's (now archived) chunks off it, and the new day's range is the
// fast shard's.
func TestFirehoseRollMovesYesterdayOffTheFastShard(t *testing.T) {
	r := cluster(t)
	ctx := eventually.Context(t, settleTimeout+time.Minute)
	day := sharding.Day(time.Now())
	spec := liveSpec(t, day) // fast: sh0, standard: sh1
	if _, err := sharding.Apply(ctx, r, spec, &strings.Builder{}, false); err != nil {
		t.Fatal(err)
	}
	events, _ := spec.Collection("events")
	ns := spec.Namespace("events")
	const fast, standard = "sh0", "sh1"

	at := func(d time.Time, i int) bson.D {
		id := bson.NewObjectIDFromTimestamp(d.Add(time.Duration(i) * time.Second))
		return bson.D{{Key: "_id", Value: id}}
	}
	yesterday, today, tomorrow := day.AddDate(0, 0, -1), day, day.AddDate(0, 0, 1)
	const perDay = 1000
	got := place(ctx, t, r, ns, docs(perDay, 500, func(i int) bson.D { return at(yesterday, i) }))
	if got[standard] != perDay {
		t.Errorf("yesterday's events went to %v, want all on the archive shard %s", got, standard)
	}
	got = place(ctx, t, r, ns, docs(perDay, 500, func(i int) bson.D { return at(today, i) }))
	if got[fast] != perDay {
		t.Errorf("today's events went to %v, want all on the firehose shard %s", got, fast)
	}

	balancerOn(ctx, t, r)
	var out strings.Builder
	if n, err := sharding.Roll(ctx, r, spec, events, tomorrow, false, &out); err != nil || n == 0 {
		t.Fatalf("roll to %s: %d steps, %v\n%s", tomorrow.Format(time.DateOnly), n, err, out.String())
	}
	settle(ctx, t, r, ns)

	todayRange := bson.D{{Key: "_id", Value: bson.D{
		{Key: "$gte", Value: oidAt(today)}, {Key: "$lt", Value: oidAt(tomorrow)}}}}
	// The balancer may call the collection compliant before it has split the firehose chunk at
	// the new boundary (a chunk across two zones counts as no violation until then), so the
	// move of the day's range off the fast shard is waited for, within the test's deadline.
	err := eventually.Until(ctx, func() error {
		if n := countOn(ctx, t, r, fast, ns, todayRange); n != 0 {
			return fmt.Errorf("after the roll the firehose shard still holds %d of the day's events", n)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	waitNoOrphans(ctx, t, r, ns)
	var archived int64
	for _, sh := range r.ShardIDs() {
		if sh != fast {
			archived += countOn(ctx, t, r, sh, ns, todayRange)
		}
	}
	if archived != perDay {
		t.Errorf("%d of the day's %d events on archive shards after the roll", archived, perDay)
	}
	got = place(ctx, t, r, ns, docs(100, 500, func(i int) bson.D { return at(tomorrow, i) }))
	if got[fast] != 100 {
		t.Errorf("the new day's events went to %v, want all on %s", got, fast)
	}
	t.Logf("roll:\n%s", out.String())
}

// oidAt is the smallest ObjectId of second t (the firehose boundary's form).
func oidAt(t time.Time) bson.ObjectID {
	var id bson.ObjectID
	binary.BigEndian.PutUint32(id[:4], uint32(t.Unix()))
	return id
}
