package mongostore

import (
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// WatchLag decides what to monitor from `hello`: a mongos (msg "isdbgrid") → the shards in
// config.shards; a replica-set member (setName) → that set itself (`serve --mongo-uri <set>`,
// which used to fail with "config.shards lists no shard"); a standalone → an error.
func TestLagTargetKindFromHello(t *testing.T) {
	decode := func(doc bson.D) helloReply {
		raw, err := bson.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		var h helloReply
		if err := bson.Unmarshal(raw, &h); err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tt := range []struct {
		name string
		doc  bson.D
		want string
	}{
		{"mongos", bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "msg", Value: "isdbgrid"}}, "mongos"},
		{"replica set primary", bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "setName", Value: "rs0"}}, "replset"},
		{"replica set secondary", bson.D{{Key: "secondary", Value: true}, {Key: "setName", Value: "rs0"}}, "replset"},
		{"standalone", bson.D{{Key: "isWritablePrimary", Value: true}}, ""},
	} {
		got, err := lagTargetKind(decode(tt.doc))
		if got != tt.want || (tt.want == "") != (err != nil) {
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		}
		if err != nil && !strings.Contains(err.Error(), "standalone") {
			t.Errorf("%s: error %q should say why", tt.name, err)
		}
	}
}
