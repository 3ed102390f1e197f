package sharding

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

var ordersUUID = bson.Binary{Subtype: 4, Data: []byte("0123456789abcdef")}

func chunkDoc(uuid bson.Binary, min, max any, shard string) bson.D {
	return bson.D{
		{Key: "_id", Value: bson.NewObjectID()},
		{Key: "uuid", Value: uuid},
		{Key: "min", Value: bson.D{{Key: "user_id", Value: min}}},
		{Key: "max", Value: bson.D{{Key: "user_id", Value: max}}},
		{Key: "shard", Value: shard},
	}
}

// hashedOrdersCluster is a recorder holding config.collections and
// config.chunks of shardmart.orders on {user_id: "hashed"}, six chunks in
// config order (not sorted: the server does not promise an order), plus a
// chunk of another collection over the same key range.
func hashedOrdersCluster(t *testing.T) *recorder {
	rec := newRecorder(t)
	rec.replies["balancerStatus"] = []bson.D{status("off", false)}
	rec.replies["buildInfo"] = []bson.D{{{Key: "version", Value: "6.0.5"}, {Key: "ok", Value: 1.0}}}
	rec.config["collections"] = []bson.D{
		{{Key: "_id", Value: "shardmart.orders"}, {Key: "uuid", Value: ordersUUID}, {Key: "key", Value: bson.D{{Key: "user_id", Value: "hashed"}}}},
		{{Key: "_id", Value: "shardmart.users"}, {Key: "uuid", Value: bson.Binary{Subtype: 4, Data: []byte("fedcba9876543210")}}},
	}
	e18 := int64(1_000_000_000_000_000_000)
	rec.config["chunks"] = []bson.D{
		chunkDoc(ordersUUID, 3*e18, 6*e18, "shard2"),
		chunkDoc(ordersUUID, bson.MinKey{}, -6*e18, "shard1"),
		chunkDoc(ordersUUID, -6*e18, -3*e18, "shard2"),
		chunkDoc(ordersUUID, 0*e18, 3*e18, "shard3"),
		chunkDoc(ordersUUID, -3*e18, 0*e18, "shard1"),
		chunkDoc(ordersUUID, 6*e18, bson.MaxKey{}, "shard1"),
		chunkDoc(bson.Binary{Subtype: 4, Data: []byte("fedcba9876543210")}, bson.MinKey{}, bson.MaxKey{}, "shard3"),
	}
	return rec
}

func ordersColl(t *testing.T) Collection {
	t.Helper()
	c, ok := defaultSpec(t).Collection("orders")
	if !ok || !c.Key.Hashed() {
		t.Fatal("orders is not hashed in the default spec")
	}
	return c
}

func bound(t *testing.T, s string) bson.D {
	t.Helper()
	d, err := ParseBound(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func moveRangeJSON(min, max string) string {
	return `{"moveRange":"shardmart.orders","toShard":"shard1","min":{"user_id":` + min + `},"max":{"user_id":` + max + `}}`
}

func nl(n string) string { return `{"$numberLong":"` + n + `"}` }

// SHD-5: a manual move over several chunks, with the balancer stopped.
func TestMoveRangeOverSeveralChunks(t *testing.T) {
	rec := hashedOrdersCluster(t)
	var out bytes.Buffer
	// [-5e18, 4e18) to shard1 overlaps four chunks: [-6e18,-3e18) on shard2
	// (range starts inside it: clipped), [-3e18,0) already on shard1 (skipped),
	// [0,3e18) on shard3, [3e18,6e18) on shard2 (range ends inside: clipped).
	err := MoveRange(context.Background(), rec, MoveRangeRequest{NS: "shardmart.orders", Collection: ordersColl(t), ToShard: "shard1", Min: bound(t, `{"user_id": -5000000000000000000}`), Max: bound(t, `{"user_id": 4000000000000000000}`)}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := []string{
		moveRangeJSON(nl("-5000000000000000000"), nl("-3000000000000000000")),
		moveRangeJSON(nl("0"), nl("3000000000000000000")),
		moveRangeJSON(nl("3000000000000000000"), nl("4000000000000000000")),
	}
	got := rec.writes()
	if len(got) != len(want) {
		t.Fatalf("sent %d commands, want %d:\n%s", len(got), len(want), out.String())
	}
	for i := range want {
		if g := ext(t, got[i]); g != want[i] {
			t.Errorf("move %d\ngot  %s\nwant %s", i+1, g, want[i])
		}
	}
	o := out.String()
	for _, s := range []string{"from shard2", "from shard3", "already on shard1", "moved 3 range(s)"} {
		if !strings.Contains(o, s) {
			t.Errorf("report lacks %q:\n%s", s, o)
		}
	}
	if n := strings.Count(o, "db.adminCommand({ moveRange:"); n != 3 {
		t.Errorf("report shows %d moveRange commands, want 3:\n%s", n, o)
	}
}

func TestMoveRangeInsideOneChunk(t *testing.T) {
	rec := hashedOrdersCluster(t)
	// int32 bounds on a hashed field are sent as NumberLong.
	err := MoveRange(context.Background(), rec, MoveRangeRequest{NS: "shardmart.orders", Collection: ordersColl(t), ToShard: "shard1", Min: bound(t, `{"user_id": 5}`), Max: bound(t, `{"user_id": 900}`), Options: MoveRangeOptions{WaitForDelete: true}}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"moveRange":"shardmart.orders","toShard":"shard1","min":{"user_id":` + nl("5") + `},"max":{"user_id":` + nl("900") + `},"waitForDelete":true}`
	if w := rec.writes(); len(w) != 1 || ext(t, w[0]) != want {
		t.Errorf("got %v\nwant %s", w, want)
	}
}

func TestMoveRangeAlreadyOnTarget(t *testing.T) {
	rec := hashedOrdersCluster(t)
	var out bytes.Buffer
	err := MoveRange(context.Background(), rec, MoveRangeRequest{NS: "shardmart.orders", Collection: ordersColl(t), ToShard: "shard1", Min: bound(t, `{"user_id": -2000000000000000000}`), Max: bound(t, `{"user_id": -1000}`)}, &out)
	if err != nil || len(rec.writes()) != 0 || !strings.Contains(out.String(), "already on shard1") {
		t.Errorf("err=%v writes=%v out=%s, want nothing sent and an 'already on shard1' report", err, rec.writes(), out.String())
	}
}

func TestMoveRangeChunkLimit(t *testing.T) {
	t.Run("configured limit", func(t *testing.T) {
		rec := hashedOrdersCluster(t)
		var out bytes.Buffer
		err := MoveRange(context.Background(), rec, MoveRangeRequest{NS: "shardmart.orders", Collection: ordersColl(t), ToShard: "shard1", Min: bound(t, `{"user_id": {"$minKey": 1}}`), Max: bound(t, `{"user_id": {"$maxKey": 1}}`), Options: MoveRangeOptions{MaxChunks: 5}}, &out)
		if !errors.Is(err, ErrTooManyChunks) || len(rec.writes()) != 0 {
			t.Fatalf("err=%v writes=%v, want ErrTooManyChunks and nothing sent", err, rec.writes())
		}
		for _, s := range []string{"6 chunks", "limit 5", "zone"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q lacks %q", err, s)
			}
		}
	})
	t.Run("default 64", func(t *testing.T) {
		rec := hashedOrdersCluster(t)
		var chunks []bson.D
		for i := range 65 {
			lo, hi := any(int64(i*1000)), any(int64((i+1)*1000))
			if i == 0 {
				lo = bson.MinKey{}
			}
			if i == 64 {
				hi = bson.MaxKey{}
			}
			chunks = append(chunks, chunkDoc(ordersUUID, lo, hi, fmt.Sprintf("shard%d", 2+i%2)))
		}
		rec.config["chunks"] = chunks
		all := func(max int) error {
			return MoveRange(context.Background(), rec, MoveRangeRequest{NS: "shardmart.orders", Collection: ordersColl(t), ToShard: "shard1", Max: bound(t, `{"user_id": {"$maxKey": 1}}`), Options: MoveRangeOptions{MaxChunks: max}}, &bytes.Buffer{})
		}
		if err := all(0); !errors.Is(err, ErrTooManyChunks) || !strings.Contains(err.Error(), "limit 64") || len(rec.writes()) != 0 {
			t.Fatalf("65 chunks, default limit: err=%v writes=%d, want ErrTooManyChunks (limit 64) and nothing sent", err, len(rec.writes()))
		}
		if err := all(65); err != nil || len(rec.writes()) != 65 {
			t.Errorf("65 chunks, limit 65: err=%v writes=%d, want 65 moves", err, len(rec.writes()))
		}
	})
}

func TestMoveRangeReadsChunksOnlyWhenAllowed(t *testing.T) {
	t.Run("balancer on: refused before anything", func(t *testing.T) {
		rec := hashedOrdersCluster(t)
		rec.replies["balancerStatus"] = []bson.D{status("full", false)}
		err := MoveRange(context.Background(), rec, MoveRangeRequest{NS: "shardmart.orders", Collection: ordersColl(t), ToShard: "shard1", Max: bound(t, `{"user_id": {"$maxKey": 1}}`)}, &bytes.Buffer{})
		if !errors.Is(err, ErrBalancerRunning) || len(rec.writes()) != 0 {
			t.Errorf("err=%v writes=%v, want ErrBalancerRunning and nothing sent", err, rec.writes())
		}
	})
	t.Run("collection not sharded", func(t *testing.T) {
		rec := hashedOrdersCluster(t)
		rec.config["collections"] = nil
		err := MoveRange(context.Background(), rec, MoveRangeRequest{NS: "shardmart.orders", Collection: ordersColl(t), ToShard: "shard1", Max: bound(t, `{"user_id": {"$maxKey": 1}}`)}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "not sharded") || len(rec.writes()) != 0 {
			t.Errorf("err=%v writes=%v, want a not-sharded error and nothing sent", err, rec.writes())
		}
	})
	t.Run("non-hash bound refused", func(t *testing.T) {
		rec := hashedOrdersCluster(t)
		err := MoveRange(context.Background(), rec, MoveRangeRequest{NS: "shardmart.orders", Collection: ordersColl(t), ToShard: "shard1", Min: bound(t, `{"user_id": "alice"}`)}, &bytes.Buffer{})
		if !errors.Is(err, ErrHashedBound) || len(rec.sent) != 0 {
			t.Errorf("err=%v sent=%v, want ErrHashedBound and nothing sent", err, rec.sent)
		}
	})
	t.Run("a failed move stops the rest and says how far it got", func(t *testing.T) {
		rec := hashedOrdersCluster(t)
		rec.errs["moveRange"] = errors.New("ConflictingOperationInProgress")
		err := MoveRange(context.Background(), rec, MoveRangeRequest{NS: "shardmart.orders", Collection: ordersColl(t), ToShard: "shard1", Min: bound(t, `{"user_id": -5000000000000000000}`), Max: bound(t, `{"user_id": 4000000000000000000}`)}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "0 of 3") || len(rec.writes()) != 1 {
			t.Errorf("err=%v writes=%d, want one attempt and an error saying 0 of 3 moved", err, len(rec.writes()))
		}
	})
}
