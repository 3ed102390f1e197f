package outbox

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// memLog is an in-memory outbox; the projector's logic is what is under test here (the real
// stores' logs are covered by the contract suite).
type memLog struct {
	mu   sync.Mutex
	last int64
	msgs []Message
	cp   map[string]int64
	fail error // returned by ReadOutbox when set
}

func (l *memLog) commit(topic string) int64 { return l.commitKey(topic, "") }

func (l *memLog) commitKey(topic, key string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last++
	l.msgs = append(l.msgs, Message{Seq: l.last, Topic: topic, Key: key})
	return l.last
}

// prune deletes the rows at or below through, as Prune would once every consumer passed them.
func (l *memLog) prune(through int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = slices.DeleteFunc(l.msgs, func(m Message) bool { return m.Seq <= through })
}

func (l *memLog) ReadOutbox(_ context.Context, after int64, limit int) ([]Message, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return nil, l.fail
	}
	var out []Message
	for _, m := range l.msgs {
		if m.Seq > after && len(out) < limit {
			out = append(out, m)
		}
	}
	return out, nil
}

func (l *memLog) Checkpoint(_ context.Context, c string) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cp[c], nil
}

// SaveCheckpoint refuses an ended ctx, as a store's write does.
func (l *memLog) SaveCheckpoint(ctx context.Context, c string, seq int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cp[c] = seq
	return nil
}

func (l *memLog) CountOutbox(context.Context) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.msgs)), nil
}

// DeleteOutbox is not used by the projector's tests (pruning is in the contract suite).
func (l *memLog) DeleteOutbox(context.Context, int64) (int64, error) { return 0, nil }

func (l *memLog) LastSeq(context.Context) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last, nil
}

// TestSyncIsReadYourWrites: whoever commits and then calls Sync finds its message applied, even
// with many concurrent callers sharing drains; and drains are shared (fewer than callers).
func TestSyncIsReadYourWrites(t *testing.T) {
	log := &memLog{cp: map[string]int64{}}
	p := NewProjector(log, "c", nil)
	var applied sync.Map
	p.Handle("t", func(_ context.Context, m Message) error {
		time.Sleep(50 * time.Microsecond) // a store write
		applied.Store(m.Seq, true)
		return nil
	})
	const callers = 200
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := log.commit("t")
			if err := p.Sync(context.Background()); err != nil {
				t.Error(err)
			}
			if _, ok := applied.Load(seq); !ok {
				t.Errorf("message %d committed before Sync is not applied after it", seq)
			}
		}()
	}
	wg.Wait()
	if d := p.started; d >= callers {
		t.Errorf("%d drains for %d callers: Sync does not share drains", d, callers)
	}
	if lag, _ := p.Lag(context.Background()); lag != 0 {
		t.Errorf("lag %d after all syncs", lag)
	}
}

// TestSyncWaiterLeavesAtItsDeadline: a caller waiting on a drain that another caller runs (and
// that hangs, as on a frozen primary) returns when its own context ends, not when that drain does.
func TestSyncWaiterLeavesAtItsDeadline(t *testing.T) {
	log := &memLog{cp: map[string]int64{}}
	log.commit("t")
	p := NewProjector(log, "c", nil)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	p.Handle("t", func(context.Context, Message) error {
		once.Do(func() { close(entered) })
		<-release
		return nil
	})
	first := make(chan error, 1)
	go func() { first <- p.Sync(context.Background()) }()
	<-entered // the first caller's drain is running and stuck

	log.commit("t")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	waiter := make(chan error, 1)
	go func() { waiter <- p.Sync(ctx) }()
	select {
	case err := <-waiter:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("waiter: %v, want its deadline", err)
		}
	case err := <-first:
		t.Fatalf("the stuck drain finished (%v) before the waiter returned", err)
	}
	select {
	case err := <-first:
		t.Fatalf("the stuck drain returned (%v) before it was released", err)
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("first caller: %v", err)
	}
	if err := p.Sync(context.Background()); err != nil {
		t.Fatalf("a later Sync: %v", err)
	}
	if lag, _ := p.Lag(context.Background()); lag != 0 {
		t.Errorf("lag %d after the drains", lag)
	}
}

// TestDrainStopsAtFailureAndResumes: a failing handler keeps the checkpoint before the failed
// message, so the next drain applies it (at least once, in order, no gap).
func TestDrainStopsAtFailureAndResumes(t *testing.T) {
	log := &memLog{cp: map[string]int64{}}
	for i := 0; i < 10; i++ {
		log.commit("t")
	}
	var seen []int64
	fail := true
	p := NewProjector(log, "c", nil)
	p.Handle("t", func(_ context.Context, m Message) error {
		if m.Seq == 6 && fail {
			fail = false
			return context.DeadlineExceeded
		}
		seen = append(seen, m.Seq)
		return nil
	})
	if n, err := p.Drain(context.Background()); err == nil || n != 5 {
		t.Fatalf("first drain: applied %d, err %v; want 5 and an error", n, err)
	}
	if cp, _ := log.Checkpoint(context.Background(), "c"); cp != 5 {
		t.Errorf("checkpoint after failure: %d, want 5", cp)
	}
	if n, err := p.Drain(context.Background()); err != nil || n != 5 {
		t.Fatalf("second drain: applied %d, err %v; want 5", n, err)
	}
	for i, seq := range seen {
		if seq != int64(i+1) {
			t.Fatalf("applied order %v: want 1..10 with no gap or repeat", seen)
		}
	}
}

// TestCancelledDrainKeepsProgress: a drain whose context is cancelled mid-way (a process being
// stopped) still records what it applied, so repeated interruptions always move forward.
func TestCancelledDrainKeepsProgress(t *testing.T) {
	log := &memLog{cp: map[string]int64{}}
	for i := 0; i < 10; i++ {
		log.commit("t")
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := NewProjector(log, "c", nil)
	p.Handle("t", func(ctx context.Context, m Message) error {
		if m.Seq == 4 {
			cancel()
		}
		return ctx.Err()
	})
	if _, err := p.Drain(ctx); err == nil {
		t.Fatal("drain with a cancelled context reported success")
	}
	if cp, _ := log.Checkpoint(context.Background(), "c"); cp != 3 {
		t.Errorf("checkpoint after cancellation: %d, want 3 (messages 1-3 applied)", cp)
	}
}

// A drain whose deadline passes after its batch is applied but before the checkpoint is saved
// still saves it: the next drain goes on after the batch instead of applying it again.
func TestDrainCutAfterItsBatchKeepsTheCheckpoint(t *testing.T) {
	log := &memLog{cp: map[string]int64{}}
	for i := 0; i < 5; i++ {
		log.commit("t")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := NewProjector(log, "c", nil)
	applied := 0
	p.Handle("t", func(_ context.Context, m Message) error {
		applied++
		if m.Seq == 5 {
			cancel() // the whole batch is applied; the drain's ctx ends before the checkpoint
		}
		return nil
	})
	_, _ = p.Drain(ctx)
	if cp, _ := log.Checkpoint(context.Background(), "c"); cp != 5 {
		t.Fatalf("checkpoint after a drain cut past its batch: %d, want 5", cp)
	}
	if n, err := p.Drain(context.Background()); err != nil || n != 0 || applied != 5 {
		t.Errorf("next drain applied %d (%v); handler ran %d times, want 0 and 5", n, err, applied)
	}
}

// partLog is a partitioned outbox of memLogs.
type partLog struct {
	memLog // the whole log's own methods are never used by the projector
	parts  []Log
}

func (p *partLog) Partitions() []Log { return p.parts }

// A partitioned log is drained partition by partition, each in its own seq order and with its
// own checkpoint, and Lag sums the partitions.
func TestProjectorDrainsEveryPartition(t *testing.T) {
	a, b := &memLog{cp: map[string]int64{}}, &memLog{cp: map[string]int64{}}
	log := &partLog{memLog: memLog{cp: map[string]int64{}}, parts: []Log{a, b}}
	a.commitKey("t", "a")
	a.commitKey("t", "a")
	b.commitKey("t", "b")
	p := NewProjector(log, "c", nil)
	var mu sync.Mutex
	seen := map[Log][]int64{} // partitions are drained at once: order is per partition
	p.Handle("t", func(_ context.Context, m Message) error {
		mu.Lock()
		defer mu.Unlock()
		part := Log(b)
		if m.Key == "a" {
			part = a
		}
		seen[part] = append(seen[part], m.Seq)
		return nil
	})
	ctx := context.Background()
	if lag, err := p.Lag(ctx); err != nil || lag != 3 {
		t.Fatalf("lag before drain: %d, %v; want 3", lag, err)
	}
	if n, err := p.Drain(ctx); err != nil || n != 3 {
		t.Fatalf("drain: %d, %v; want 3", n, err)
	}
	if !slices.Equal(seen[a], []int64{1, 2}) || !slices.Equal(seen[b], []int64{1}) {
		t.Errorf("applied seqs a=%v b=%v, want a=[1 2] and b=[1], each in order", seen[a], seen[b])
	}
	if a.cp["c"] != 2 || b.cp["c"] != 1 || len(log.cp) != 0 {
		t.Errorf("checkpoints a=%d b=%d whole=%v, want 2, 1 and none on the whole log", a.cp["c"], b.cp["c"], log.cp)
	}
	b.commit("t")
	if lag, _ := p.Lag(ctx); lag != 1 {
		t.Errorf("lag after one more message: %d, want 1", lag)
	}
}

// TestDrainAppliesKeysConcurrentlyInOrderPerKey: messages of one key are applied in seq order
// even though keys run concurrently, and when one key fails the checkpoint stops before its
// message (later messages of other keys, applied or not, are replayed: handlers are idempotent).
func TestDrainAppliesKeysConcurrentlyInOrderPerKey(t *testing.T) {
	log := &memLog{cp: map[string]int64{}}
	for i := range 300 {
		log.msgs = append(log.msgs, Message{Seq: int64(i + 1), Topic: "t", Key: string(rune('a' + i%7))})
	}
	log.msgs[150].Topic = "bad" // key of message 151 fails once
	p := NewProjector(log, "c", nil)
	var (
		mu      sync.Mutex
		lastSeq map[string]int64 // per drain
		failed  bool
	)
	apply := func(_ context.Context, m Message) error {
		mu.Lock()
		defer mu.Unlock()
		if m.Topic == "bad" && !failed {
			failed = true
			return errors.New("boom")
		}
		if m.Seq <= lastSeq[m.Key] {
			t.Errorf("key %s: #%d applied after #%d in one drain", m.Key, m.Seq, lastSeq[m.Key])
		}
		lastSeq[m.Key] = m.Seq
		return nil
	}
	p.Handle("t", apply)
	p.Handle("bad", apply)
	lastSeq = map[string]int64{}
	if _, err := p.Drain(context.Background()); err == nil {
		t.Fatal("drain with a failing handler: want the error")
	}
	lastSeq = map[string]int64{}
	if cp := log.cp["c"]; cp != 150 {
		t.Errorf("checkpoint after the failure at #151: %d, want 150", cp)
	}
	if _, err := p.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cp := log.cp["c"]; cp != 300 {
		t.Errorf("checkpoint after the retry: %d, want 300", cp)
	}
}
