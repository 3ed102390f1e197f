package readrouting_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/readrouting"
)

// TestResumedPrimaryIsNotVouchedForUntilOnTheNewTerm freezes the primary (SIGSTOP) until
// another member is elected and the frozen one is more than the 5 s budget (and 16 MB) behind,
// resumes it,
// and then, every 50 ms for 8 s, measures the set (Monitor.Measure, as each round does) and
// asks the Policy about a product page while reading the resumed member directly: its hello
// and its newest tick. The truth is its staleness: now − the time of the first tick the set
// kept that it lacks. Whenever its own hello says SECONDARY (a driver may then pick it) and its
// staleness is past the budget, the Policy must not send the page to secondaries. Before the
// fix it did: the new primary's status still called the resumed member PRIMARY, from its last
// heartbeat, with an applied time only ~100 ms old (it had written in its old term after the
// resume), and a member called PRIMARY was left out of the worst-secondary bound.
func TestResumedPrimaryIsNotVouchedForUntilOnTheNewTerm(t *testing.T) {
	set := readrouting.LiveSet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	old := set.Primary(ctx)
	if old < 0 {
		t.Fatal("no primary")
	}
	db := "resumed_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	w := startTickWriter(t, set.URI(), db)
	eventually.True(t, 10*time.Second, "the writer's first second of ticks", func() bool { return w.written() >= 20 })

	setClient := connect(t, set.URI(), readpref.Primary())
	mon := readrouting.NewMonitor(map[string]readrouting.StatusSource{set.Name(): readrouting.DriverSource{Client: setClient}}, time.Second)
	kept := setClient.Database(db).Collection("ticks")
	oc := connect(t, set.MemberURI(old), readpref.Nearest())
	onOld := oc.Database(db).Collection("ticks")
	others := map[int]*mongo.Client{}
	for i := range set.Members() {
		if i != old {
			others[i] = connect(t, set.MemberURI(i), readpref.Nearest())
		}
	}

	paused := time.Now()
	if err := set.Pause(old); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			if err := set.Resume(old); err != nil {
				t.Errorf("SIGCONT member %d: %v", old, err)
			}
		}
	}
	t.Cleanup(resume)
	// Held until another member is primary and the set has kept ticks for more than the
	// budget since: the resumed member is then that far behind.
	var elected time.Time
	eventually.True(t, 90*time.Second, "another member elected, and taking ticks for budget + 1 s", func() bool {
		if elected.IsZero() {
			for _, c := range others {
				if isPrimary(ctx, c) {
					elected = time.Now()
				}
			}
			return false
		}
		return time.Since(elected) > budget+time.Second && w.written() > 0
	})
	// 16 MB more for the resumed member to fetch and apply: its catch-up, the window in which a
	// driver may read it while it is behind, then lasts long enough to be sampled.
	bulk := setClient.Database(db).Collection("bulk")
	pad := strings.Repeat("x", 4096)
	for b := range 8 {
		docs := make([]any, 500)
		for i := range docs {
			docs[i] = bson.D{{Key: "_id", Value: b*len(docs) + i}, {Key: "pad", Value: pad}}
		}
		if _, err := bulk.InsertMany(ctx, docs); err != nil {
			t.Fatalf("bulk insert on the new primary: %v", err)
		}
	}
	resume()
	back := time.Now()
	t.Logf("member %d (%s) frozen %s, another primary elected %s after the freeze",
		old, set.Hosts()[old], back.Sub(paused).Round(time.Millisecond), elected.Sub(paused).Round(time.Millisecond))

	policy := readrouting.NewPolicy()
	exposed := 0 // samples in which the resumed member was a SECONDARY past the budget
	every := time.NewTicker(50 * time.Millisecond)
	defer every.Stop()
	for ; time.Since(back) < 8*time.Second; <-every.C {
		snap := mon.Measure(ctx)
		d := policy.Decide(readrouting.OpProductPage, snap, time.Now())
		secondary, stale, err := resumedView(ctx, oc, onOld, kept)
		switch {
		case err != nil:
			t.Logf("+%s member %d: %v (policy: %s, %s)", time.Since(back).Round(time.Millisecond), old, err, d.Target, d.Reason)
		case secondary && stale > budget:
			exposed++
			m, _ := snap.Member(set.Hosts()[old])
			t.Logf("+%s member %d SECONDARY %s behind; its status entry %+v; policy: %s (%s)",
				time.Since(back).Round(time.Millisecond), old, stale.Round(time.Millisecond), m, d.Target, d.Reason)
			if d.Target == readrouting.Secondary {
				t.Errorf("a product page (budget %s) routed to secondaries while member %d, a SECONDARY to drivers, was %s behind",
					budget, old, stale.Round(time.Millisecond))
			}
		}
	}
	if exposed == 0 {
		t.Errorf("member %d was never seen as a SECONDARY past the %s budget after the resume: the case was not put to the test", old, budget)
	}
	t.Logf("%d samples with member %d a SECONDARY past the budget", exposed, old)
}

func connect(t *testing.T, uri string, rp *readpref.ReadPref) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetReadPreference(rp))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

func isPrimary(ctx context.Context, c *mongo.Client) bool {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	var hello struct {
		Primary bool `bson:"isWritablePrimary"`
	}
	return c.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello) == nil && hello.Primary
}

// resumedView is what a driver sees of the resumed member (its hello says SECONDARY) and how
// stale its data is: now − the time of the first tick the set kept (on the primary) that the
// member lacks; 0 if it lacks none.
func resumedView(ctx context.Context, member *mongo.Client, onMember, kept *mongo.Collection) (secondary bool, stale time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	var hello struct {
		Secondary bool `bson:"secondary"`
	}
	if err := member.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return false, 0, fmt.Errorf("hello: %w", err)
	}
	newest, err := newestTick(ctx, onMember)
	if err != nil {
		return false, 0, fmt.Errorf("newest tick: %w", err)
	}
	var missing tick
	err = kept.FindOne(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: newest.Seq}}}},
		options.FindOne().SetSort(bson.D{{Key: "_id", Value: 1}})).Decode(&missing)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return hello.Secondary, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("first tick it lacks: %w", err)
	}
	return hello.Secondary, time.Since(missing.TS), nil
}
