package mongostore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/readrouting"
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

// refusingSource answers replSetGetStatus with err at once and records the deadline it was
// given.
type refusingSource struct {
	err      error
	deadline chan time.Time
}

func (s refusingSource) ReplSetStatus(ctx context.Context) (readrouting.ReplSetStatus, error) {
	d, _ := ctx.Deadline()
	s.deadline <- d
	return readrouting.ReplSetStatus{}, s.err
}

// The start-up probe reports the first refusing set by name whichever answers first, counts a
// connection closed at the handshake (maybe a shard going down) as no refusal, and gives the
// sets the limit asked for, not a fixed few seconds.
func TestProbeAccessReportsTheFirstSetsRefusal(t *testing.T) {
	unauthorized := mongo.CommandError{Code: 13, Name: "Unauthorized", Message: `not authorized on admin to execute command { replSetGetStatus: 1 }`}
	closed := errors.New("connection() error occurred during connection handshake: incomplete read of message header: EOF")
	for range 20 {
		deadlines := make(chan time.Time, 3)
		sources := map[string]readrouting.StatusSource{
			"sh2": refusingSource{unauthorized, deadlines},
			"sh0": refusingSource{closed, deadlines},
			"sh1": refusingSource{unauthorized, deadlines},
		}
		began := time.Now()
		err := probeAccess(context.Background(), sources, time.Minute)
		if err == nil || !strings.HasPrefix(err.Error(), "set sh1: mongodb: not authorized to run replSetGetStatus") {
			t.Fatalf("probeAccess = %v; want sh1's refusal", err)
		}
		for range 3 {
			if d := <-deadlines; d.Sub(began) < 59*time.Second {
				t.Fatalf("a probe got %s of the minute asked for", d.Sub(began))
			}
		}
	}
}
