package sharding

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// recorder is a test Admin: it records every command sent and answers from
// canned replies and canned config.* documents. It checks shardmart's
// decisions and documents; it says nothing about how a real server behaves.
type recorder struct {
	t       *testing.T
	sent    []sentCmd
	replies map[string][]bson.D // by command name, consumed in order; the last repeats
	errs    map[string]error    // by command name
	config  map[string][]bson.D // "coll" → documents (filter matched on _id or ns)
}

type sentCmd struct {
	DB  string
	Cmd bson.D
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, replies: map[string][]bson.D{}, errs: map[string]error{}, config: map[string][]bson.D{}}
}

func (r *recorder) RunCommand(_ context.Context, db string, cmd bson.D) (bson.Raw, error) {
	name := cmd[0].Key
	r.sent = append(r.sent, sentCmd{DB: db, Cmd: cmd})
	if err := r.errs[name]; err != nil {
		return nil, err
	}
	reply := bson.D{{Key: "ok", Value: 1.0}}
	if rs := r.replies[name]; len(rs) > 0 {
		reply = rs[0]
		if len(rs) > 1 {
			r.replies[name] = rs[1:]
		}
	}
	raw, err := bson.Marshal(reply)
	if err != nil {
		r.t.Fatalf("marshal canned reply: %v", err)
	}
	return raw, nil
}

func (r *recorder) Find(_ context.Context, db, coll string, filter bson.D) ([]bson.Raw, error) {
	if db != "config" {
		return nil, fmt.Errorf("recorder: find on %s.%s", db, coll)
	}
	var out []bson.Raw
	for _, d := range r.config[coll] {
		if matches(d, filter) {
			raw, err := bson.Marshal(d)
			if err != nil {
				r.t.Fatalf("marshal canned doc: %v", err)
			}
			out = append(out, raw)
		}
	}
	return out, nil
}

// matches is an equality match on top-level fields, comparing the BSON
// encodings (type and bytes), so binary uuids and documents match too.
func matches(d, filter bson.D) bool {
	for _, f := range filter {
		found := false
		for _, e := range d {
			if e.Key == f.Key && sameBSON(e.Value, f.Value) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func sameBSON(a, b any) bool {
	ta, da, errA := bson.MarshalValue(a)
	tb, db, errB := bson.MarshalValue(b)
	return errA == nil && errB == nil && ta == tb && bytes.Equal(da, db)
}

// writes lists the commands sent that change the cluster, in order.
func (r *recorder) writes() []bson.D {
	var out []bson.D
	for _, s := range r.sent {
		switch s.Cmd[0].Key {
		case "listIndexes", "balancerStatus", "buildInfo":
			continue
		}
		out = append(out, s.Cmd)
	}
	return out
}

func ext(t *testing.T, d bson.D) string {
	t.Helper()
	b, err := bson.MarshalExtJSON(d, true, false)
	if err != nil {
		t.Fatalf("marshal %v: %v", d, err)
	}
	return string(b)
}
