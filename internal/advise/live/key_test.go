package live

import (
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/sharding"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		in   string
		want sharding.Key
		err  string
	}{
		{"{user_id: hashed}", sharding.Key{{Name: "user_id", Kind: sharding.Hashed}}, ""},
		{`{ user_id: "hashed" }`, sharding.Key{{Name: "user_id", Kind: sharding.Hashed}}, ""},
		{"{category: 1, _id: 1}", sharding.Key{{Name: "category"}, {Name: "_id"}}, ""},
		{"{customer.id: 1}", sharding.Key{{Name: "customer.id"}}, ""},
		{"{a: -1}", nil, "want 1 or hashed"},
		{"user_id", nil, "want a key such as"},
		{"{}", nil, "want a key such as"},
	}
	for _, tt := range tests {
		got, err := ParseKey(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseKey(%q): got %v, %v; want an error with %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseKey(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestCommandLeavesThePasswordOut(t *testing.T) {
	tests := []struct{ uri, ns, want string }{
		{"mongodb://mongos:27017", "shop.orders", "shardmart advise --from mongodb://mongos:27017 --collection shop.orders"},
		{"mongodb://admin:p%40ss@a:1,b:2/?authSource=admin", "shop.orders",
			"shardmart advise --from 'mongodb://admin@a:1,b:2/?authSource=admin' --collection shop.orders"},
		{"mongodb+srv://u:x@cluster.example.net", "db.it's", "shardmart advise --from mongodb+srv://u@cluster.example.net --collection 'db.it'\\''s'"},
		{"mongodb://h/db?x=a@b", "a.b", "shardmart advise --from 'mongodb://h/db?x=a@b' --collection a.b"},
	}
	for _, tt := range tests {
		if got := Command(tt.uri, tt.ns); got != tt.want {
			t.Errorf("Command(%q, %q) = %q, want %q", tt.uri, tt.ns, got, tt.want)
		}
	}
}

func TestEqualityFields(t *testing.T) {
	f, _ := bson.Marshal(bson.D{
		{Key: "user_id", Value: "u1"},
		{Key: "status", Value: bson.D{{Key: "$eq", Value: "paid"}}},
		{Key: "created", Value: bson.D{{Key: "$gte", Value: 1}}},
		{Key: "sku", Value: bson.D{{Key: "$in", Value: bson.A{"a", "b"}}}},
		{Key: "customer", Value: bson.D{{Key: "id", Value: 7}}}, // an embedded document compared whole
		{Key: "$or", Value: bson.A{}},
	})
	got := equalityFields(f)
	if want := []string{"customer", "status", "user_id"}; !slices.Equal(got, want) {
		t.Errorf("equalityFields = %v, want %v", got, want)
	}
}
