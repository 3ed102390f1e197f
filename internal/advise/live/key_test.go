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
		// The driver's user info ends at the first '@': this is user "h/db?x=a", refused.
		{"mongodb://h/db?x=a@b", "a.b", "shardmart advise --from MONGOS_URI --collection a.b"},
		{"mongodb://u:pa?ss@h:1", "a.b", "shardmart advise --from mongodb://u@h:1 --collection a.b"},
		{"mongodb://u:pa/ss@h:1", "a.b", "shardmart advise --from MONGOS_URI --collection a.b"},
		{"mongodb://u:pa%zzss@h:1", "a.b", "shardmart advise --from MONGOS_URI --collection a.b"},
		{"mongodb://AKIA:s3cret@h:1/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:tok3n", "a.b",
			"shardmart advise --from 'mongodb://AKIA@h:1/?authMechanism=MONGODB-AWS' --collection a.b"},
		{"mongodb://AKIA:s3cret@h:1/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:tok3n;tls=true", "a.b",
			"shardmart advise --from 'mongodb://AKIA@h:1/?authMechanism=MONGODB-AWS&tls=true' --collection a.b"},
		{"mongodb://u@h:1/?authMechanism=GSSAPI&authMechanismProperties=SERVICE_NAME:mongo", "a.b",
			"shardmart advise --from 'mongodb://u@h:1/?authMechanism=GSSAPI&authMechanismProperties=SERVICE_NAME:mongo' --collection a.b"},
		{"mongodb://h:1/?tls=true&tlsCertificateKeyFile=/k.pem&tlsCertificateKeyFilePassword=s3cret&proxyHost=p&proxyUsername=pu&proxyPassword=s3cret", "a.b",
			"shardmart advise --from 'mongodb://h:1/?tls=true&tlsCertificateKeyFile=/k.pem&proxyHost=p&proxyUsername=pu' --collection a.b"},
		{"MONGOS_URI", "a.b", "shardmart advise --from MONGOS_URI --collection a.b"},
		{"mongodb://h:99999", "a.b", "shardmart advise --from MONGOS_URI --collection a.b"},
	}
	for _, tt := range tests {
		got := Command(tt.uri, tt.ns)
		if got != tt.want {
			t.Errorf("Command(%q, %q) = %q, want %q", tt.uri, tt.ns, got, tt.want)
		}
		for _, secret := range []string{"s3cret", "tok3n", ":pa", ":p%40ss", ":x@"} {
			if strings.Contains(got, secret) {
				t.Errorf("Command(%q, %q) = %q: %q is left in", tt.uri, tt.ns, got, secret)
			}
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
