package readrouting

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/drivertest"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/xoptions"
)

// statusDoc is a replSetGetStatus reply shaped as MongoDB 6.0.5 returns it (fields checked on
// the launcher's real 3-member set): optimeDate whole seconds, lastAppliedWallTime in ms.
func statusDoc(date time.Time, members ...bson.D) bson.D {
	arr := bson.A{}
	for _, m := range members {
		arr = append(arr, m)
	}
	return bson.D{{Key: "set", Value: "rs0"}, {Key: "date", Value: date},
		{Key: "heartbeatIntervalMillis", Value: int64(2000)}, {Key: "members", Value: arr}, {Key: "ok", Value: 1.0}}
}

func memberDoc(name, state string, health float64, self bool, applied, hbRecv, hbSent time.Time) bson.D {
	d := bson.D{{Key: "name", Value: name}, {Key: "health", Value: health}, {Key: "stateStr", Value: state},
		{Key: "optimeDate", Value: applied.Truncate(time.Second)},
		{Key: "lastAppliedWallTime", Value: applied}}
	if self {
		return append(d, bson.E{Key: "self", Value: true})
	}
	return append(d, bson.E{Key: "lastHeartbeat", Value: hbSent}, bson.E{Key: "lastHeartbeatRecv", Value: hbRecv})
}

func decodeStatus(t *testing.T, doc bson.D) ReplSetStatus {
	t.Helper()
	raw, err := bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var st ReplSetStatus
	if err := bson.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// An idle primary: its last entry (a write the secondary never got, at :58.5) shares the whole
// second :58 with the secondary's last applied entry (:58.0), and nothing was written since.
// optimeDate says 0 lag; the secondary has in fact been missing a write for 7.5 s at the
// status date :06.0, and its applied writes trail the primary's clock by 8 s.
func TestLagUsesAppliedWallTimeAgainstStatusDateNotWholeSecondOptimes(t *testing.T) {
	date := t0.Add(6 * time.Second)
	secApplied := t0.Add(-2 * time.Second)         // 09:59:58.000
	priApplied := t0.Add(-1500 * time.Millisecond) // 09:59:58.500, same whole second
	heard := date.Add(-500 * time.Millisecond)     // healthy heartbeats
	st := decodeStatus(t, statusDoc(date,
		memberDoc("p:1", StatePrimary, 1, true, priApplied, time.Time{}, time.Time{}),
		memberDoc("s:1", StateSecondary, 1, false, secApplied, heard, heard)))
	lags := LagFromStatus(st)
	if len(lags) != 2 {
		t.Fatalf("got %d members", len(lags))
	}
	sec := lags[1]
	if !sec.Known || sec.Lag != 8*time.Second {
		t.Fatalf("secondary lag %s (known %t), want 8s: date − lastAppliedWallTime", sec.Lag, sec.Known)
	}
	// With a 2 s-fresh snapshot, a 10 s budget is exceeded: primary.
	d := NewPolicy().Decide(OpOrderHistory, LagSnapshot{MeasuredAt: t0, Members: lags}, t0.Add(2*time.Second))
	if d.Target != Primary {
		t.Errorf("history: %s (%s), want primary", d.Target, d.Reason)
	}
}

// Sub-second precision: a secondary 900 ms behind within one whole second is 900 ms, not 0.
func TestLagHasMillisecondPrecision(t *testing.T) {
	date := t0.Add(950 * time.Millisecond)
	st := decodeStatus(t, statusDoc(date,
		memberDoc("p:1", StatePrimary, 1, true, t0.Add(940*time.Millisecond), time.Time{}, time.Time{}),
		memberDoc("s:1", StateSecondary, 1, false, t0.Add(50*time.Millisecond), date, date)))
	if got := LagFromStatus(st)[1].Lag; got != 900*time.Millisecond {
		t.Errorf("lag %s, want 900ms", got)
	}
}

// A member the primary no longer hears from is never fresh: with health 0 (stateStr
// "(not reachable/healthy)", optimeDate zeroed, lastHeartbeat advanced to a timed-out request's
// deadline, as 6.0.5 reports a SIGSTOPped member) or with a lastHeartbeatRecv older than two
// heartbeat intervals while still called SECONDARY, secondary reads go to the primary.
func TestUnheardMemberIsNeverFresh(t *testing.T) {
	date := t0
	fresh := date.Add(-300 * time.Millisecond)
	primary := memberDoc("p:1", StatePrimary, 1, true, fresh, time.Time{}, time.Time{})
	healthy := memberDoc("s:1", StateSecondary, 1, false, fresh, fresh, fresh)
	for name, member := range map[string]bson.D{
		"health 0": {{Key: "name", Value: "s:2"}, {Key: "health", Value: 0.0}, {Key: "stateStr", Value: "(not reachable/healthy)"},
			{Key: "optimeDate", Value: time.Unix(0, 0)}, {Key: "lastAppliedWallTime", Value: fresh},
			{Key: "lastHeartbeat", Value: date.Add(-100 * time.Millisecond)}, {Key: "lastHeartbeatRecv", Value: date.Add(-13 * time.Second)}},
		"SECONDARY, last heartbeat 4.5 s ago": memberDoc("s:2", StateSecondary, 1, false, fresh, date.Add(-4500*time.Millisecond), fresh),
		"SECONDARY, never heard":              memberDoc("s:2", StateSecondary, 1, false, fresh, time.Time{}, fresh),
	} {
		t.Run(name, func(t *testing.T) {
			lags := LagFromStatus(decodeStatus(t, statusDoc(date, primary, healthy, member)))
			m := lags[2]
			if m.Known || !m.Unreachable {
				t.Errorf("member %+v: want Known=false, Unreachable=true", m)
			}
			if !lags[1].Known || lags[1].Unreachable {
				t.Errorf("healthy member %+v: want known and reachable", lags[1])
			}
			d := NewPolicy().Decide(OpOrderHistory, LagSnapshot{MeasuredAt: date, Members: lags}, date)
			if d.Target != Primary || !strings.Contains(d.Reason, "s:2 unreachable") {
				t.Errorf("history: %s (%s), want primary because s:2 is unreachable", d.Target, d.Reason)
			}
		})
	}
	// Two intervals is the limit: 3.9 s with 2 s heartbeats is still heard.
	lags := LagFromStatus(decodeStatus(t, statusDoc(date, primary,
		memberDoc("s:2", StateSecondary, 1, false, fresh, date.Add(-3900*time.Millisecond), fresh))))
	if !lags[1].Known || lags[1].Unreachable {
		t.Errorf("member heard 3.9 s ago: %+v, want known", lags[1])
	}
}

func TestDefaultUncertaintyIsOneHeartbeatInterval(t *testing.T) {
	if u := NewPolicy().Uncertainty; u != DefaultHeartbeatInterval {
		t.Errorf("uncertainty %s, want the 500 ms heartbeat interval", u)
	}
}

// clockSource takes step of the monitor's (fake) clock to answer.
type clockSource struct {
	mu    *sync.Mutex
	clock *time.Time
	step  time.Duration
	st    ReplSetStatus
}

func (c clockSource) ReplSetStatus(context.Context) (ReplSetStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.clock = c.clock.Add(c.step)
	return c.st, nil
}

func TestMeasureStampsTheStartOfTheRound(t *testing.T) {
	var mu sync.Mutex
	clock := t0
	src := clockSource{mu: &mu, clock: &clock, step: 800 * time.Millisecond, st: ReplSetStatus{Set: "s"}}
	m := NewMonitor(map[string]StatusSource{"a": src, "b": src}, time.Second)
	m.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	snap := m.Measure(context.Background())
	if !snap.MeasuredAt.Equal(t0) {
		t.Errorf("MeasuredAt %s, want the round's start %s (reads took until %s)", snap.MeasuredAt, t0, clock)
	}
}

// hbSource counts heartbeats.
type hbSource struct {
	fakeSource
	mu   sync.Mutex
	sets []string
}

func (h *hbSource) Heartbeat(_ context.Context, set string, _ time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sets = append(h.sets, set)
	return nil
}

func TestRunWritesHeartbeatsEveryInterval(t *testing.T) {
	src := &hbSource{}
	m := NewMonitor(map[string]StatusSource{"rs7": src}, time.Hour)
	m.HeartbeatInterval = 5 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_ = m.Run(ctx)
	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.sets) < 5 {
		t.Fatalf("%d heartbeats in 200 ms at a 5 ms interval, want many", len(src.sets))
	}
	if src.sets[0] != "rs7" {
		t.Errorf("heartbeat for %q, want the set rs7", src.sets[0])
	}
	if DefaultHeartbeatInterval != 500*time.Millisecond || NewMonitor(nil, time.Second).HeartbeatInterval != DefaultHeartbeatInterval {
		t.Error("the default heartbeat interval should be 500 ms")
	}
}

func TestWithCredentials(t *testing.T) {
	c := Credentials{User: "monitor", Password: "p@ss/word"}
	tests := []struct{ in, want string }{
		{"mongodb://app:apppw@mongos:27017/?authSource=admin", "mongodb://monitor:p%40ss%2Fword@mongos:27017/?authSource=admin"},
		{"mongodb://mongos:27017", "mongodb://monitor:p%40ss%2Fword@mongos:27017/?authSource=admin"},
		{"mongodb://app:pw@mongos:27017/shardmart?authMechanism=SCRAM-SHA-256", "mongodb://monitor:p%40ss%2Fword@mongos:27017/shardmart?authMechanism=SCRAM-SHA-256&authSource=admin"},
		{"mongodb://app:pw@h1:1,h2:2/?replicaSet=rs0&authSource=ops", "mongodb://monitor:p%40ss%2Fword@h1:1,h2:2/?replicaSet=rs0&authSource=ops"},
	}
	for _, tt := range tests {
		got, err := WithCredentials(tt.in, c)
		if err != nil || got != tt.want {
			t.Errorf("WithCredentials(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if got, err := WithCredentials("mongodb://app:pw@h:1", Credentials{}); err != nil || got != "mongodb://app:pw@h:1" {
		t.Errorf("zero credentials changed the URI: %q, %v", got, err)
	}
	if _, err := WithCredentials("mongodb://h:1", Credentials{Password: "x"}); err == nil {
		t.Error("a password without a user should be refused")
	}
}

// mockMongos is a client on the driver's mock deployment answering one find on config.shards.
func mockMongos(t *testing.T, shards ...bson.D) *mongo.Client {
	t.Helper()
	batch := bson.A{}
	for _, s := range shards {
		batch = append(batch, s)
	}
	md := drivertest.NewMockDeployment(bson.D{{Key: "ok", Value: 1}, {Key: "cursor", Value: bson.D{
		{Key: "id", Value: int64(0)}, {Key: "ns", Value: "config.shards"}, {Key: "firstBatch", Value: batch}}}})
	opts := options.Client()
	if err := xoptions.SetInternalClientOptions(opts, "deployment", md); err != nil {
		t.Fatal(err)
	}
	c, err := mongo.Connect(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// On a sharded cluster the mongos users do not exist on the shards: the URIs the monitor
// derives from config.shards carry the monitor's credentials, not the mongos ones.
func TestMonitorShardURIsCarryMonitorCredentials(t *testing.T) {
	const mongosURI = "mongodb://app:app-secret@mongos:27017/?authSource=admin&tls=false"
	shards := []bson.D{
		{{Key: "_id", Value: "shard1"}, {Key: "host", Value: "shard1/s1a:27018,s1b:27018"}},
		{{Key: "_id", Value: "shard2"}, {Key: "host", Value: "shard2/s2a:27018"}},
	}
	cred := Credentials{User: "lagmon", Password: "mon secret"}
	uris, err := MonitorShardURIs(context.Background(), mockMongos(t, shards...), mongosURI, cred)
	if err != nil {
		t.Fatal(err)
	}
	if len(uris) != 2 {
		t.Fatalf("got %v, want 2 shards", uris)
	}
	for shard, u := range uris {
		cs, err := connstring.ParseAndValidate(u)
		if err != nil {
			t.Fatalf("%s: driver refuses %s: %v", shard, u, err)
		}
		if cs.Username != "lagmon" || cs.Password != "mon secret" || cs.AuthSource != "admin" {
			t.Errorf("%s: %s authenticates as %q/%q (authSource %q), want the monitor's lagmon", shard, u, cs.Username, cs.Password, cs.AuthSource)
		}
		if strings.Contains(u, "app") {
			t.Errorf("%s: %s still carries the mongos credentials", shard, u)
		}
		if cs.ReplicaSet != shard {
			t.Errorf("%s: replicaSet %q", shard, cs.ReplicaSet)
		}
	}
	// Without monitor credentials the mongos ones are kept (a cluster whose users are on the
	// shards too).
	uris, err = MonitorShardURIs(context.Background(), mockMongos(t, shards[0]), mongosURI, Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	if cs, _ := connstring.ParseAndValidate(uris["shard1"]); cs.Username != "app" {
		t.Errorf("zero credentials: %s, want the mongos user kept", uris["shard1"])
	}
}
