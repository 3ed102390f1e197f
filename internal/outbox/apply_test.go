package outbox

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// commitMsg commits a message with a payload and returns it as its caller knows it (no seq).
func (l *memLog) commitMsg(topic, key, payload string) Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	l.msgs = append(l.msgs, Message{Seq: l.last, Topic: topic, Key: key, Payload: []byte(payload)})
	return Message{Topic: topic, Key: key, Payload: []byte(payload)}
}

// counter counts a handler's successful applications per key.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

// TestApplyDoesNotWaitOnAnotherUsersFollowUps: user A's follow-up blocks (its store hangs);
// user B's Apply returns while A's is still blocked, with a drain running meanwhile (which
// waits for A's claim), and A's applies once released.
func TestApplyDoesNotWaitOnAnotherUsersFollowUps(t *testing.T) {
	log := &memLog{cp: map[string]int64{}}
	p := NewProjector(log, "c", nil)
	entered, release := make(chan struct{}), make(chan struct{})
	var applied counter
	p.Handle("order", func(ctx context.Context, m Message) error {
		if m.Key == "a" {
			close(entered)
			<-release
		}
		applied.add(m.Key)
		return nil
	})
	a := log.commitMsg("order", "a", `{"id":"a"}`)
	b := log.commitMsg("order", "b", `{"id":"b"}`)
	aDone := make(chan error, 1)
	go func() { aDone <- p.Apply(context.Background(), a) }()
	<-entered
	drained := make(chan error, 1)
	go func() {
		_, err := p.Drain(context.Background())
		drained <- err
	}()
	if err := p.Apply(context.Background(), b); err != nil {
		t.Fatalf("B's Apply: %v", err)
	}
	if got := applied.get("b"); got != 1 {
		t.Fatalf("B's follow-up applied %d times when B's Apply returned, want 1", got)
	}
	select {
	case err := <-aDone:
		t.Fatalf("A's Apply returned (%v) before its follow-up was released", err)
	default:
	}
	close(release)
	if err := <-aDone; err != nil {
		t.Fatalf("A's Apply: %v", err)
	}
	if err := <-drained; err != nil {
		t.Fatalf("drain: %v", err)
	}
	if _, err := p.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ga, gb := applied.get("a"), applied.get("b"); ga != 1 || gb != 1 {
		t.Errorf("applied a %d and b %d times, want each once (the drain skips what Apply applied)", ga, gb)
	}
	if lag, _ := p.Lag(context.Background()); lag != 0 {
		t.Errorf("lag %d after the drains", lag)
	}
}

// TestApplyCutShortLeavesTheEntryToTheDrain: an Apply whose context ends mid-follow-up (its
// request's bound) and a commit whose caller never applied it (a crash after the commit) are
// both applied by the drain, once; an applied entry is not applied again by the drain, while
// its refresh handlers run in both.
func TestApplyCutShortLeavesTheEntryToTheDrain(t *testing.T) {
	log := &memLog{cp: map[string]int64{}}
	p := NewProjector(log, "c", nil)
	var entries, refreshes counter
	p.Handle("order", func(ctx context.Context, m Message) error {
		if m.Key == "slow" && ctx.Done() != nil {
			if _, bounded := ctx.Deadline(); bounded {
				<-ctx.Done() // the caller's store hangs past its bound
				return ctx.Err()
			}
		}
		entries.add(m.Key)
		return nil
	})
	p.Refresh("order", func(_ context.Context, m Message) error {
		refreshes.add(m.Key)
		return nil
	})
	slow := log.commitMsg("order", "slow", `{"id":"slow"}`)
	log.commitMsg("order", "crashed", `{"id":"crashed"}`)
	fine := log.commitMsg("order", "fine", `{"id":"fine"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := p.Apply(ctx, slow); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cut Apply: %v, want its deadline", err)
	}
	if err := p.Apply(context.Background(), fine); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := p.Drain(context.Background()); err != nil {
			t.Fatalf("drain %d: %v", i, err)
		}
	}
	for key, want := range map[string][2]int{"slow": {1, 2}, "crashed": {1, 1}, "fine": {1, 2}} {
		if got := [2]int{entries.get(key), refreshes.get(key)}; got != want {
			t.Errorf("%s: entry applied %d times, refreshed %d; want %d and %d", key, got[0], got[1], want[0], want[1])
		}
	}
}

// TestIdenticalMessagesAreEachApplied: an ack is the caller's message only; a later message
// with the same topic, key and payload is another message, applied by the drain.
func TestIdenticalMessagesAreEachApplied(t *testing.T) {
	log := &memLog{cp: map[string]int64{}}
	p := NewProjector(log, "c", nil)
	var entries counter
	p.Handle("t", func(_ context.Context, m Message) error {
		entries.add(m.Key)
		return nil
	})
	m := log.commitMsg("t", "k", "same")
	if err := p.Apply(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	log.commitMsg("t", "k", "same")
	if n, err := p.Drain(context.Background()); err != nil || n != 2 {
		t.Fatalf("drain: %d, %v; want 2 messages passed", n, err)
	}
	if got := entries.get("k"); got != 2 {
		t.Errorf("applied %d times, want 2: the applied one once, the later one by the drain", got)
	}
}

// TestSyncAfterACutDrainStartsAnother: a drain that runs out of its bound is no answer for a
// Sync waiting on it: Sync waits for the next drain, which applies the message.
func TestSyncAfterACutDrainStartsAnother(t *testing.T) {
	log := &memLog{cp: map[string]int64{}}
	log.commit("t")
	p := NewProjector(log, "c", nil)
	p.drainLimit = 20 * time.Millisecond
	var calls, applied counter
	p.Handle("t", func(ctx context.Context, _ Message) error {
		calls.add("t")
		if calls.get("t") == 1 {
			<-ctx.Done() // the first drain hangs until its bound cuts it
			return ctx.Err()
		}
		applied.add("t")
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Sync(ctx); err != nil {
		t.Fatalf("Sync: %v, want the next drain's success", err)
	}
	if got := applied.get("t"); got != 1 || p.started < 2 {
		t.Errorf("applied %d times in %d drains, want once, in the second", got, p.started)
	}
}

// TestRefreshHandlerPanicReachesTheDrain: a refresh handler runs beside the entry handlers, in
// a goroutine of its own, but its panic is the drain's, as a handler's panic was before: the
// process crashes, and a caller that recovers (a supervisor, a test) sees it.
func TestRefreshHandlerPanicReachesTheDrain(t *testing.T) {
	log := &memLog{cp: map[string]int64{}}
	p := NewProjector(log, "c", nil)
	p.Handle("t", func(context.Context, Message) error { return nil })
	p.Refresh("t", func(context.Context, Message) error { panic("refresh crashed") })
	log.commitMsg("t", "k", "v")
	got := func() (r any) {
		defer func() { r = recover() }()
		_, _ = p.Drain(context.Background())
		return nil
	}()
	if got != "refresh crashed" {
		t.Fatalf("the drain recovered %v, want the refresh handler's panic", got)
	}
}
