package live_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/advise"
	"github.com/shardmart/shardmart/internal/advise/live"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/sharding"
)

// The replica-set tests share one 1-member set on launcher.AdviseTestPort+90, started on
// first use and killed by TestMain.
var rs struct {
	once   sync.Once
	set    *launcher.Set
	stop   func()
	client *live.Client
	err    error
}

func replicaSet(t *testing.T) *live.Client {
	t.Helper()
	rs.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		rs.set, rs.stop, rs.err = launcher.StartShared(ctx, launcher.Options{Members: 1, BasePort: launcher.AdviseTestPort + 90})
		if rs.err == nil {
			rs.client, rs.err = live.Connect(ctx, rs.set.URI())
		}
	})
	if rs.err != nil {
		t.Fatalf("replica set on port %d: %v", launcher.AdviseTestPort+90, rs.err)
	}
	return rs.client
}

func stopSet() {
	if rs.client != nil {
		_ = rs.client.Close(context.Background())
	}
	if rs.stop != nil {
		rs.stop()
	}
}

func collection(c *live.Client, ns string) *mongo.Collection {
	db, coll, _ := strings.Cut(ns, ".")
	return c.C.Database(db).Collection(coll)
}

func insertOrders(ctx context.Context, t *testing.T, c *live.Client, ns string, n int) []bson.D {
	t.Helper()
	ds := orders(n, 50, 9, time.Now().Add(-time.Hour))
	docs := make([]any, len(ds))
	for i, d := range ds {
		docs[i] = d
	}
	if _, err := collection(c, ns).InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	return ds
}

func profileLevel(ctx context.Context, t *testing.T, c *live.Client, db string) (level, slowms int64) {
	t.Helper()
	raw := profileSetting(ctx, t, c, db)
	return raw.Lookup("was").AsInt64(), raw.Lookup("slowms").AsInt64()
}

func profileSetting(ctx context.Context, t *testing.T, c *live.Client, db string) bson.Raw {
	t.Helper()
	raw, err := c.RunCommand(ctx, db, bson.D{{Key: "profile", Value: int32(-1)}})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// setProfile sets db's profiler and, at cleanup, the server-wide defaults back (slowms and
// sampleRate are shared by every database of the set).
func setProfile(ctx context.Context, t *testing.T, c *live.Client, db string, cmd bson.D) {
	t.Helper()
	t.Cleanup(func() {
		_, err := c.RunCommand(context.Background(), db, bson.D{{Key: "profile", Value: int32(0)}, {Key: "slowms", Value: int32(100)},
			{Key: "sampleRate", Value: 1.0}, {Key: "filter", Value: "unset"}})
		if err != nil {
			t.Errorf("reset the profiler of %s: %v", db, err)
		}
	})
	if _, err := c.RunCommand(ctx, db, cmd); err != nil {
		t.Fatal(err)
	}
}

func refusal(t *testing.T, err error, want string) {
	t.Helper()
	var ref *live.Refusal
	if !errors.As(err, &ref) || !strings.Contains(ref.Msg, want) || strings.Contains(ref.Msg, "\n") {
		t.Fatalf("got %v, want a one-line refusal containing %q", err, want)
	}
}

func TestRefusesAMissingCollection(t *testing.T) {
	c := replicaSet(t)
	ctx := eventually.Context(t, time.Minute)
	_, err := live.Read(ctx, c, liveDB(t)+".nothing", live.Options{})
	refusal(t, err, "not found")
}

func TestRefusesATooSmallCollection(t *testing.T) {
	c := replicaSet(t)
	ctx := eventually.Context(t, time.Minute)
	ns := liveDB(t) + ".orders"
	insertOrders(ctx, t, c, ns, 20)
	_, err := live.Read(ctx, c, ns, live.Options{})
	refusal(t, err, "holds 20 documents: too few")
}

// The profiler sample sees the operations run during its window, by type and equality
// filter, and the profiler goes back to the setting it was found at (level 1, slowms 50,
// sampleRate 0.5 and a filter here), before system.profile is read.
func TestProfileSampleReadsTheMixAndRestoresTheLevel(t *testing.T) {
	c := replicaSet(t)
	ctx := eventually.Context(t, 2*time.Minute)
	db := liveDB(t)
	ns := db + ".orders"
	ds := insertOrders(ctx, t, c, ns, 300)
	filter := bson.D{{Key: "millis", Value: bson.D{{Key: "$gte", Value: int32(40)}}}}
	setProfile(ctx, t, c, db, bson.D{{Key: "profile", Value: int32(1)}, {Key: "slowms", Value: int32(50)},
		{Key: "sampleRate", Value: 0.5}, {Key: "filter", Value: filter}})
	coll := collection(c, ns)
	// The window lasts as long as the operations take: the wait runs them and returns.
	work := func(ctx context.Context, _ time.Duration) error {
		for i := range 30 {
			if err := coll.FindOne(ctx, bson.D{{Key: "user_id", Value: ds[i][1].Value}}).Err(); err != nil {
				return err
			}
		}
		for i := range 10 {
			if _, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: ds[i][0].Value}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "total_cents", Value: 1}}}}); err != nil {
				return err
			}
		}
		more := orders(5, 50, 10, time.Now())
		for _, d := range more {
			if _, err := coll.InsertOne(ctx, d); err != nil {
				return err
			}
		}
		return nil
	}
	r, err := live.Read(ctx, c, ns, live.Options{ProfileSeconds: 1, Wait: work})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, op := range r.Profile.Ops {
		got[op.Type+" "+strings.Join(op.Filter, ",")] = op.Count
	}
	want := map[string]int64{"find user_id": 30, "update _id": 10, "insert ": 5}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("profiled %q ×%d, want ×%d (all: %v)", k, got[k], n, got)
		}
	}
	after := profileSetting(ctx, t, c, db)
	wantFilter, _ := bson.Marshal(filter)
	if lvl, slow, rate := after.Lookup("was").AsInt64(), after.Lookup("slowms").AsInt64(), after.Lookup("sampleRate").AsFloat64(); lvl != 1 || slow != 50 || rate != 0.5 ||
		!bytes.Equal(after.Lookup("filter").Document(), wantFilter) {
		t.Errorf("profiler after the sample: %s, want the previous level 1, slowms 50, sampleRate 0.5, filter %s", after, bson.Raw(wantFilter))
	}
	// The mix drives the simulation: under {user_id: hashed} the reads by user are targeted.
	a, err := r.Workload(live.Model{Candidates: []sharding.Key{{{Name: "user_id", Kind: sharding.Hashed}}}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := advise.SimulateCandidate(ctx, a.Workload, a.Collection, a.Collection.Candidates[0])
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, st := range res.OpStats {
		if st.Name == "find by user_id" {
			found = true
			if st.Count == 0 || st.SingleShard != st.Count {
				t.Errorf("find by user_id under {user_id: hashed}: %d of %d single-shard, want all", st.SingleShard, st.Count)
			}
		}
	}
	if !found {
		t.Errorf("no find by user_id simulated (ops: %+v)", res.OpStats)
	}
}

// ordersOf200 is a fresh database on the shared set holding 200 orders in db.orders.
func ordersOf200(t *testing.T) (c *live.Client, ctx context.Context, db, ns string) {
	c = replicaSet(t)
	ctx = eventually.Context(t, time.Minute)
	db = liveDB(t)
	ns = db + ".orders"
	insertOrders(ctx, t, c, ns, 200)
	return c, ctx, db, ns
}

// A cancelled run still switches the profiler back off.
func TestProfileRestoredWhenCancelled(t *testing.T) {
	c, ctx, db, ns := ordersOf200(t)
	runCtx, cancel := context.WithCancel(ctx)
	cancelled := func(ctx context.Context, _ time.Duration) error {
		if lvl, _ := profileLevel(ctx, t, c, db); lvl != 2 {
			t.Errorf("profiler level during the window: %d, want 2", lvl)
		}
		cancel()
		<-ctx.Done()
		return ctx.Err()
	}
	_, err := live.Read(runCtx, c, ns, live.Options{ProfileSeconds: 5, Wait: cancelled})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if lvl, _ := profileLevel(ctx, t, c, db); lvl != 0 {
		t.Errorf("profiler after a cancelled sample: level %d, want 0 (as found)", lvl)
	}
}

// lostReply is a real source whose reply to the profile command that switches level 2 on is
// lost after the server applied it, as a timeout would lose it.
type lostReply struct{ live.Source }

func (s lostReply) RunCommand(ctx context.Context, db string, cmd bson.D) (bson.Raw, error) {
	raw, err := s.Source.RunCommand(ctx, db, cmd)
	if err == nil && cmd[0].Key == "profile" && cmd[0].Value == int32(2) {
		return nil, context.DeadlineExceeded
	}
	return raw, err
}

// The profiler goes back to the setting found when the switch's reply is lost and when the
// wait fails.
func TestProfileRestoredOnFailure(t *testing.T) {
	c, ctx, db, ns := ordersOf200(t)
	setProfile(ctx, t, c, db, bson.D{{Key: "profile", Value: int32(1)}, {Key: "slowms", Value: int32(70)}})
	_, err := live.Read(ctx, lostReply{c}, ns, live.Options{ProfileSeconds: 1})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lost reply: got %v, want the switch's error", err)
	}
	if lvl, slow := profileLevel(ctx, t, c, db); lvl != 1 || slow != 70 {
		t.Errorf("profiler after a lost reply: level %d slowms %d, want the previous 1 and 70", lvl, slow)
	}
	failed := errors.New("wait failed")
	_, err = live.Read(ctx, c, ns, live.Options{ProfileSeconds: 1, Wait: func(context.Context, time.Duration) error { return failed }})
	if !errors.Is(err, failed) {
		t.Fatalf("failed wait: got %v, want its error", err)
	}
	if lvl, slow := profileLevel(ctx, t, c, db); lvl != 1 || slow != 70 {
		t.Errorf("profiler after a failed wait: level %d slowms %d, want the previous 1 and 70", lvl, slow)
	}
}

// A database whose profiler is already at level 2 is refused and left at level 2.
func TestProfileRefusesLevelTwo(t *testing.T) {
	c, ctx, db, ns := ordersOf200(t)
	setProfile(ctx, t, c, db, bson.D{{Key: "profile", Value: int32(2)}})
	_, err := live.Read(ctx, c, ns, live.Options{ProfileSeconds: 1, Wait: func(context.Context, time.Duration) error {
		t.Error("waited on a database already at level 2")
		return nil
	}})
	refusal(t, err, "already at level 2")
	if lvl, _ := profileLevel(ctx, t, c, db); lvl != 2 {
		t.Errorf("profiler after the refusal: level %d, want 2 untouched", lvl)
	}
}
