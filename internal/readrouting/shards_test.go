package readrouting

import (
	"net/url"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

func TestShardURIAlwaysHasPath(t *testing.T) {
	const host = "shard1/shard1-a:27018,shard1-b:27018,shard1-c:27018"
	tests := []struct {
		name, mongos, want string
	}{
		{"no path", "mongodb://mongos:27017",
			"mongodb://shard1-a:27018,shard1-b:27018,shard1-c:27018/?replicaSet=shard1"},
		{"no path, credentials and options", "mongodb://user:pw@mongos:27017?authSource=admin",
			"mongodb://user:pw@shard1-a:27018,shard1-b:27018,shard1-c:27018/?authSource=admin&replicaSet=shard1"},
		{"path /", "mongodb://mongos:27017/",
			"mongodb://shard1-a:27018,shard1-b:27018,shard1-c:27018/?replicaSet=shard1"},
		{"path /admin kept", "mongodb://user:pw@mongos:27017/admin?w=majority",
			"mongodb://user:pw@shard1-a:27018,shard1-b:27018,shard1-c:27018/admin?replicaSet=shard1&w=majority"},
		{"directConnection dropped", "mongodb://mongos:27017/?directConnection=true&readPreference=primary",
			"mongodb://shard1-a:27018,shard1-b:27018,shard1-c:27018/?readPreference=primary&replicaSet=shard1"},
		{"existing replicaSet replaced", "mongodb://mongos:27017/?replicaSet=other",
			"mongodb://shard1-a:27018,shard1-b:27018,shard1-c:27018/?replicaSet=shard1"},
		{"several mongos hosts", "mongodb://m1:27017,m2:27017/?authSource=admin",
			"mongodb://shard1-a:27018,shard1-b:27018,shard1-c:27018/?authSource=admin&replicaSet=shard1"},
		{"escaped credentials kept", "mongodb://us%40er:p%2Fw@mongos:27017",
			"mongodb://us%40er:p%2Fw@shard1-a:27018,shard1-b:27018,shard1-c:27018/?replicaSet=shard1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ShardURI(tt.mongos, host)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ShardURI(%q)\ngot  %s\nwant %s", tt.mongos, got, tt.want)
			}
			// The driver must accept it: connstring parsing, then client options.
			cs, err := connstring.ParseAndValidate(got)
			if err != nil {
				t.Fatalf("driver connstring refuses %s: %v", got, err)
			}
			if cs.ReplicaSet != "shard1" || len(cs.Hosts) != 3 || cs.Connect == connstring.SingleConnect {
				t.Errorf("parsed: replicaSet=%q hosts=%v connect=%v", cs.ReplicaSet, cs.Hosts, cs.Connect)
			}
			if in, _ := url.Parse(tt.mongos); in.User != nil {
				pw, _ := in.User.Password()
				if cs.Username != in.User.Username() || cs.Password != pw {
					t.Errorf("credentials: got %q/%q, want %q/%q", cs.Username, cs.Password, in.User.Username(), pw)
				}
			}
			opts := options.Client().ApplyURI(got)
			if err := opts.Validate(); err != nil {
				t.Errorf("options.Client().ApplyURI(%s).Validate(): %v", got, err)
			}
		})
	}
}

func TestShardURIRefusesBadInput(t *testing.T) {
	for _, tt := range []struct{ mongos, host string }{
		{"mongodb://mongos:27017", "shard1-a:27018"},   // no set name
		{"mongodb://mongos:27017", "shard1/"},          // no hosts
		{"mongodb+srv://cluster.example.com", "s/h:1"}, // SRV names the mongos
		{"mongodb://mongos:27017/%zz", "s/h:1"},        // unparsable
	} {
		if got, err := ShardURI(tt.mongos, tt.host); err == nil {
			t.Errorf("ShardURI(%q, %q) = %q, want an error", tt.mongos, tt.host, got)
		}
	}
}
