package readrouting

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// deposedStatus is replSetGetStatus as the new primary (term 2) answered it 104 ms after the
// old primary, SIGSTOPped for 10 s, was resumed (launcher set, mongod 6.0.5, 2 s election
// timeout): the old primary is still PRIMARY in the status (from its last heartbeat), its
// optime is from term 1, and its lastAppliedWallTime is 96 ms old, because it wrote in term 1
// after the resume. At that moment its own hello already said secondary: true and a direct
// read on it returned data 7.1 s old (the newest tick it held; ticks were written every 50 ms).
func deposedStatus(state string) bson.D {
	ms := func(s string) time.Time {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		return t
	}
	member := func(name, state string, self bool, ts bson.Timestamp, term int64, applied, heard string) bson.D {
		d := bson.D{{Key: "name", Value: name}, {Key: "health", Value: 1.0}, {Key: "stateStr", Value: state},
			{Key: "optime", Value: bson.D{{Key: "ts", Value: ts}, {Key: "t", Value: term}}},
			{Key: "optimeDate", Value: time.Unix(int64(ts.T), 0)},
			{Key: "lastAppliedWallTime", Value: ms(applied)}}
		if self {
			return append(d, bson.E{Key: "self", Value: true})
		}
		return append(d, bson.E{Key: "lastHeartbeatRecv", Value: ms(heard)})
	}
	return bson.D{{Key: "set", Value: "rs0"}, {Key: "date", Value: ms("2026-11-26T02:57:32.978Z")},
		{Key: "term", Value: int64(2)}, {Key: "heartbeatIntervalMillis", Value: int64(2000)},
		{Key: "members", Value: bson.A{
			member("127.0.0.1:27720", state, false, bson.Timestamp{T: 1795661852, I: 2}, 1, "2026-11-26T02:57:32.88Z", "2026-11-26T02:57:32.966Z"),
			member("127.0.0.1:27721", StatePrimary, true, bson.Timestamp{T: 1795661852, I: 23}, 2, "2026-11-26T02:57:32.951Z", ""),
			member("127.0.0.1:27722", StateSecondary, false, bson.Timestamp{T: 1795661852, I: 22}, 2, "2026-11-26T02:57:32.951Z", "2026-11-26T02:57:31.879Z"),
		}}, {Key: "ok", Value: 1.0}}
}

// A primary that was frozen through a failover and resumed is not fresh, whatever its applied
// time says: until it has applied an entry of the new primary's term it may hold writes a
// rollback will undo and lack every write since the election. Budgeted reads go to the
// primary while the status shows such a member, whether it still calls it PRIMARY (it did in
// the run above), already SECONDARY, or ROLLBACK (a driver sees SECONDARY at once when the
// rollback ends). This is how a product page read a price replaced 9.2 s before in the
// robustness test's pause of the primary.
func TestResumedDeposedPrimaryIsNeverFresh(t *testing.T) {
	for _, state := range []string{StatePrimary, StateSecondary, "ROLLBACK"} {
		t.Run(state, func(t *testing.T) {
			st := decodeStatus(t, deposedStatus(state))
			lags := LagFromStatus(st)
			old := lags[0]
			if old.Known || !old.OldTerm || old.Unreachable {
				t.Fatalf("resumed old primary %+v: want OldTerm, not Known, reachable", old)
			}
			if !lags[2].Known || lags[2].OldTerm || lags[2].Lag != 27*time.Millisecond {
				t.Errorf("caught-up secondary %+v: want Known, current term, lag 27ms", lags[2])
			}
			d := NewPolicy().Decide(OpProductPage, LagSnapshot{MeasuredAt: st.Date, Members: lags}, st.Date.Add(300*time.Millisecond))
			if d.Target != Primary || !strings.Contains(d.Reason, "127.0.0.1:27720") {
				t.Errorf("product page: %s (%s), want primary because of 127.0.0.1:27720", d.Target, d.Reason)
			}
		})
	}
	// Once it has applied the new term's entries its applied time counts again.
	doc := deposedStatus(StateSecondary)
	members := doc[4].Value.(bson.A)
	members[0].(bson.D)[3].Value = bson.D{{Key: "ts", Value: bson.Timestamp{T: 1795661852, I: 22}}, {Key: "t", Value: int64(2)}}
	st := decodeStatus(t, doc)
	lags := LagFromStatus(st)
	if !lags[0].Known || lags[0].OldTerm {
		t.Fatalf("member on the current term: %+v, want Known", lags[0])
	}
	if d := NewPolicy().Decide(OpProductPage, LagSnapshot{MeasuredAt: st.Date, Members: lags}, st.Date.Add(300*time.Millisecond)); d.Target != Secondary {
		t.Errorf("product page once every member is on the current term: %s (%s), want secondary", d.Target, d.Reason)
	}
}
