package sharding

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func TestCommandDocuments(t *testing.T) {
	productsKey := Key{asc("category"), asc("_id")}
	books := Range{
		Min:  FillMin(productsKey, bson.D{{Key: "category", Value: "books"}}),
		Max:  FillMax(productsKey, bson.D{{Key: "category", Value: "books"}}),
		Zone: "fast",
	}
	oid := objectIDAt(time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)).(bson.ObjectID)
	tests := []struct {
		name  string
		got   bson.D
		want  string // canonical Extended JSON
		shell string // mongosh rendering on admin, "" to skip
	}{
		{"enableSharding", EnableShardingCmd("shardmart"),
			`{"enableSharding":"shardmart"}`,
			`db.adminCommand({ enableSharding: "shardmart" })`},
		{"shardCollection hashed", ShardCollectionCmd("shardmart.orders", Key{hashed("user_id")}),
			`{"shardCollection":"shardmart.orders","key":{"user_id":"hashed"}}`,
			`db.adminCommand({ shardCollection: "shardmart.orders", key: { user_id: "hashed" } })`},
		{"shardCollection compound", ShardCollectionCmd("shardmart.products", productsKey),
			`{"shardCollection":"shardmart.products","key":{"category":{"$numberInt":"1"},"_id":{"$numberInt":"1"}}}`,
			`db.adminCommand({ shardCollection: "shardmart.products", key: { category: 1, _id: 1 } })`},
		{"createIndexes with partial and TTL", CreateIndexesCmd("carts",
			Index{Name: "active_by_user", Key: Key{asc("user_id"), asc("status")}, Partial: bson.D{{Key: "status", Value: "active"}}},
			Index{Name: "expires_at_ttl", Key: Key{asc("expires_at")}, TTL: true}),
			`{"createIndexes":"carts","indexes":[{"key":{"user_id":{"$numberInt":"1"},"status":{"$numberInt":"1"}},"name":"active_by_user","partialFilterExpression":{"status":"active"}},{"key":{"expires_at":{"$numberInt":"1"}},"name":"expires_at_ttl","expireAfterSeconds":{"$numberInt":"0"}}]}`,
			""},
		{"addShardToZone", AddShardToZoneCmd("shard1", "fast"),
			`{"addShardToZone":"shard1","zone":"fast"}`,
			`db.adminCommand({ addShardToZone: "shard1", zone: "fast" })`},
		{"removeShardFromZone", RemoveShardFromZoneCmd("shard1", "fast"),
			`{"removeShardFromZone":"shard1","zone":"fast"}`, ""},
		{"updateZoneKeyRange full prefix", UpdateZoneKeyRangeCmd("shardmart.products", books),
			`{"updateZoneKeyRange":"shardmart.products","min":{"category":"books","_id":{"$minKey":1}},"max":{"category":"books","_id":{"$maxKey":1}},"zone":"fast"}`,
			`db.adminCommand({ updateZoneKeyRange: "shardmart.products", min: { category: "books", _id: MinKey }, max: { category: "books", _id: MaxKey }, zone: "fast" })`},
		{"remove zone range", RemoveZoneKeyRangeCmd("shardmart.products", books.Min, books.Max),
			`{"updateZoneKeyRange":"shardmart.products","min":{"category":"books","_id":{"$minKey":1}},"max":{"category":"books","_id":{"$maxKey":1}},"zone":null}`,
			`db.adminCommand({ updateZoneKeyRange: "shardmart.products", min: { category: "books", _id: MinKey }, max: { category: "books", _id: MaxKey }, zone: null })`},
		{"balancerStatus", BalancerStatusCmd(), `{"balancerStatus":{"$numberInt":"1"}}`, `db.adminCommand({ balancerStatus: 1 })`},
		{"balancerStart", BalancerStartCmd(), `{"balancerStart":{"$numberInt":"1"}}`, ""},
		{"balancerStop default wait", BalancerStopCmd(0), `{"balancerStop":{"$numberInt":"1"}}`, ""},
		{"balancerStop with maxTimeMS", BalancerStopCmd(90 * time.Second),
			`{"balancerStop":{"$numberInt":"1"},"maxTimeMS":{"$numberLong":"90000"}}`,
			`db.adminCommand({ balancerStop: 1, maxTimeMS: NumberLong("90000") })`},
		{"moveRange", MoveRangeCmd("shardmart.products", "shard2", books.Min, books.Max, MoveRangeOptions{WaitForDelete: true}),
			`{"moveRange":"shardmart.products","toShard":"shard2","min":{"category":"books","_id":{"$minKey":1}},"max":{"category":"books","_id":{"$maxKey":1}},"waitForDelete":true}`,
			""},
		{"moveRange without max", MoveRangeCmd("shardmart.events", "shard2", bson.D{{Key: "_id", Value: oid}}, nil, MoveRangeOptions{}),
			`{"moveRange":"shardmart.events","toShard":"shard2","min":{"_id":{"$oid":"6b00df000000000000000000"}}}`,
			`db.adminCommand({ moveRange: "shardmart.events", toShard: "shard2", min: { _id: ObjectId("6b00df000000000000000000") } })`},
		{"moveChunk fallback with bounds", MoveChunkCmd("shardmart.products", "shard2", books.Min, books.Max, MoveRangeOptions{}),
			`{"moveChunk":"shardmart.products","bounds":[{"category":"books","_id":{"$minKey":1}},{"category":"books","_id":{"$maxKey":1}}],"to":"shard2"}`,
			""},
		{"moveChunk fallback with find", MoveChunkCmd("shardmart.orders", "shard2", bson.D{{Key: "user_id", Value: int64(-154124144)}}, nil, MoveRangeOptions{}),
			`{"moveChunk":"shardmart.orders","find":{"user_id":{"$numberLong":"-154124144"}},"to":"shard2"}`,
			`db.adminCommand({ moveChunk: "shardmart.orders", find: { user_id: NumberLong("-154124144") }, to: "shard2" })`},
		{"buildInfo", BuildInfoCmd(), `{"buildInfo":{"$numberInt":"1"}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ext(t, tt.got); got != tt.want {
				t.Errorf("document\ngot  %s\nwant %s", got, tt.want)
			}
			if tt.shell != "" {
				if got := Shell("admin", tt.got); got != tt.shell {
					t.Errorf("mongosh\ngot  %s\nwant %s", got, tt.shell)
				}
			}
		})
	}
}

func TestShellOnDatabase(t *testing.T) {
	got := Shell("shardmart", CreateIndexesCmd("orders", Index{Name: "user_id_hashed", Key: Key{hashed("user_id")}}))
	want := `db.getSiblingDB("shardmart").runCommand({ createIndexes: "orders", indexes: [ { key: { user_id: "hashed" }, name: "user_id_hashed" } ] })`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// SHD-3: zone ranges.
func TestZoneRangeFor(t *testing.T) {
	products := Collection{Name: "products", Key: Key{asc("category"), asc("_id")}}
	tests := []struct {
		name     string
		min, max bson.D
		want     string
		wantErr  bool
	}{
		{"one category", bson.D{{Key: "category", Value: "books"}}, bson.D{{Key: "category", Value: "books"}},
			`{"updateZoneKeyRange":"db.products","min":{"category":"books","_id":{"$minKey":1}},"max":{"category":"books","_id":{"$maxKey":1}},"zone":"z"}`, false},
		{"whole collection", nil, nil,
			`{"updateZoneKeyRange":"db.products","min":{"category":{"$minKey":1},"_id":{"$minKey":1}},"max":{"category":{"$maxKey":1},"_id":{"$maxKey":1}},"zone":"z"}`, false},
		{"category span", bson.D{{Key: "category", Value: "a"}}, bson.D{{Key: "category", Value: "m"}},
			`{"updateZoneKeyRange":"db.products","min":{"category":"a","_id":{"$minKey":1}},"max":{"category":"m","_id":{"$maxKey":1}},"zone":"z"}`, false},
		{"seed's _id-only bound is not a prefix", bson.D{{Key: "_id", Value: bson.MinKey{}}}, bson.D{{Key: "_id", Value: bson.MaxKey{}}}, "", true},
		{"min above max", bson.D{{Key: "category", Value: "z"}}, bson.D{{Key: "category", Value: "a"}}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ZoneRangeFor(products, tt.min, tt.max, "z")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %t", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got := ext(t, UpdateZoneKeyRangeCmd("db.products", r)); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestParseBound(t *testing.T) {
	d, err := ParseBound(`{"category": "books", "_id": {"$oid": "6a1fae000000000000000000"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := shellValue(d), `{ category: "books", _id: ObjectId("6a1fae000000000000000000") }`; got != want {
		t.Errorf("got %s want %s", got, want)
	}
	if _, err := ParseBound(`{category: books}`); err == nil {
		t.Error("invalid JSON: got nil error")
	}
}

func TestVersionAtLeast(t *testing.T) {
	tests := []struct {
		v    string
		want bool
	}{
		{"6.0.3", true}, {"6.0.2", false}, {"6.0.10", true}, {"7.0.0", true}, {"5.0.26", false},
		{"8.0.4-rc1", true}, {"6.0.3-rc0", true}, {"garbage", false},
	}
	for _, tt := range tests {
		if got := VersionAtLeast(tt.v, 6, 0, 3); got != tt.want {
			t.Errorf("VersionAtLeast(%q, 6.0.3) = %t, want %t", tt.v, got, tt.want)
		}
	}
}

func TestZoneRangeDecodesMinMaxKey(t *testing.T) {
	in := bson.D{
		{Key: "ns", Value: "shardmart.events"},
		{Key: "min", Value: bson.D{{Key: "_id", Value: bson.MinKey{}}}},
		{Key: "max", Value: bson.D{{Key: "_id", Value: bson.MaxKey{}}}},
		{Key: "tag", Value: "fast"},
	}
	raw, err := bson.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var z ZoneRange
	if err := bson.Unmarshal(raw, &z); err != nil {
		t.Fatal(err)
	}
	if !docsEqual(z.Min, bson.D{{Key: "_id", Value: bson.MinKey{}}}) || !docsEqual(z.Max, bson.D{{Key: "_id", Value: bson.MaxKey{}}}) {
		t.Errorf("got min %s max %s, want MinKey/MaxKey", shellValue(z.Min), shellValue(z.Max))
	}
}

func TestDocsEqualNumbers(t *testing.T) {
	// config.collections written by the legacy shell holds doubles.
	if !docsEqual(bson.D{{Key: "category", Value: 1.0}, {Key: "_id", Value: int32(1)}}, Key{asc("category"), asc("_id")}.Doc()) {
		t.Error("1.0 and int32(1) keys should be equal")
	}
	if docsEqual(bson.D{{Key: "user_id", Value: int32(1)}}, Key{hashed("user_id")}.Doc()) {
		t.Error("range and hashed keys should differ")
	}
}
