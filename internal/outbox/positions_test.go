package outbox

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// countedLog is a partition that counts the projector's and the tail's reads of it.
type countedLog struct {
	*memLog
	reads, checkpoints, lastSeqs atomic.Int64
}

func (c *countedLog) ReadOutbox(ctx context.Context, after int64, limit int) ([]Message, error) {
	c.reads.Add(1)
	return c.memLog.ReadOutbox(ctx, after, limit)
}

func (c *countedLog) Checkpoint(ctx context.Context, consumer string) (int64, error) {
	c.checkpoints.Add(1)
	return c.memLog.Checkpoint(ctx, consumer)
}

func (c *countedLog) LastSeq(ctx context.Context) (int64, error) {
	c.lastSeqs.Add(1)
	return c.memLog.LastSeq(ctx)
}

// positionsLog is a partitioned log that reports every partition's position in one call, as
// MongoDB's does in one query.
type positionsLog struct {
	partLog
	counted []*countedLog
	calls   atomic.Int64
}

func newPositionsLog(n int) *positionsLog {
	l := &positionsLog{partLog: partLog{memLog: memLog{cp: map[string]int64{}}}}
	for range n {
		c := &countedLog{memLog: &memLog{cp: map[string]int64{}}}
		l.counted = append(l.counted, c)
		l.parts = append(l.parts, c)
	}
	return l
}

func (l *positionsLog) LastSeqs(context.Context) ([]int64, error) {
	l.calls.Add(1)
	out := make([]int64, len(l.counted))
	for i, c := range l.counted {
		c.mu.Lock()
		out[i] = c.last
		c.mu.Unlock()
	}
	return out, nil
}

func (l *positionsLog) Checkpoints(_ context.Context, consumer string) ([]int64, error) {
	l.calls.Add(1)
	out := make([]int64, len(l.counted))
	for i, c := range l.counted {
		c.mu.Lock()
		out[i] = c.cp[consumer]
		c.mu.Unlock()
	}
	return out, nil
}

// reads is how many ReadOutbox, Checkpoint and LastSeq calls each partition had.
func (l *positionsLog) reads() (reads, perPartition []int64) {
	for _, c := range l.counted {
		reads = append(reads, c.reads.Load())
		perPartition = append(perPartition, c.checkpoints.Load()+c.lastSeqs.Load())
	}
	return reads, perPartition
}

// A log that says where its partitions stand is drained by reading only the partitions with
// messages past the checkpoint, once each (the last seq is known: no read to find nothing
// more), and asking no partition for its checkpoint or last seq; Sync still applies what was
// committed before it, and Lag agrees with what is left.
func TestDrainReadsOnlyPartitionsThatMoved(t *testing.T) {
	ctx := context.Background()
	log := newPositionsLog(6)
	log.counted[1].commitKey("t", "x")
	log.counted[1].commitKey("t", "x")
	log.counted[4].commitKey("t", "y")
	p := NewProjector(log, "c", nil)
	var mu sync.Mutex
	var applied []string
	p.Handle("t", func(_ context.Context, m Message) error {
		mu.Lock()
		defer mu.Unlock()
		applied = append(applied, m.Key)
		return nil
	})
	if lag, err := p.Lag(ctx); err != nil || lag != 3 {
		t.Fatalf("lag: %d, %v; want 3", lag, err)
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	slices.Sort(applied)
	if !slices.Equal(applied, []string{"x", "x", "y"}) {
		t.Fatalf("applied %v, want x, x, y", applied)
	}
	reads, perPart := log.reads()
	if !slices.Equal(reads, []int64{0, 1, 0, 0, 1, 0}) {
		t.Errorf("ReadOutbox calls per partition %v, want one on partitions 1 and 4 only", reads)
	}
	if !slices.Equal(perPart, make([]int64, 6)) {
		t.Errorf("per-partition Checkpoint/LastSeq calls %v, want none (the log's positions say)", perPart)
	}
	if log.counted[1].cp["c"] != 2 || log.counted[4].cp["c"] != 1 {
		t.Errorf("checkpoints %d and %d, want 2 and 1", log.counted[1].cp["c"], log.counted[4].cp["c"])
	}
	if lag, err := p.Lag(ctx); err != nil || lag != 0 {
		t.Errorf("lag after Sync: %d, %v; want 0", lag, err)
	}
	// Nothing new: a drain reads the positions and nothing else.
	before := log.calls.Load()
	if n, err := p.Drain(ctx); err != nil || n != 0 {
		t.Fatalf("idle drain: %d, %v", n, err)
	}
	if reads2, _ := log.reads(); !slices.Equal(reads2, reads) || log.calls.Load() != before+2 {
		t.Errorf("idle drain: reads %v (were %v), position calls %d, want no read and 2 position calls",
			reads2, reads, log.calls.Load()-before)
	}
	log.counted[5].commitKey("t", "z")
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(applied) != 4 || applied[3] != "z" {
		t.Errorf("after a commit to partition 5, applied %v; want z last", applied)
	}
}

// A tail on such a log reads only the partitions whose end moved since its last poll, and
// still hands over every message once, in order per partition; with a ceiling it stops at the
// consumer's checkpoints.
func TestTailReadsOnlyPartitionsThatMoved(t *testing.T) {
	ctx := context.Background()
	for _, ceiling := range []string{"", "projector"} {
		log := newPositionsLog(4)
		log.counted[0].commitKey("t", "0")
		tail := NewTail(log, ceiling)
		var mu sync.Mutex
		seen := map[int][]int64{}
		tail.Handle("t", func(_ context.Context, m Message) error {
			mu.Lock()
			defer mu.Unlock()
			part := int(m.Key[0] - '0')
			seen[part] = append(seen[part], m.Seq)
			return nil
		})
		if err := tail.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		log.counted[2].commitKey("t", "2")
		log.counted[2].commitKey("t", "2")
		log.counted[3].commitKey("t", "3")
		if ceiling != "" {
			log.counted[2].cp[ceiling] = 1 // the projector applied only the first of partition 2's
			log.counted[3].cp[ceiling] = 1
		}
		if err := tail.Poll(ctx); err != nil {
			t.Fatal(err)
		}
		reads, perPart := log.reads()
		if !slices.Equal(reads, []int64{0, 0, 1, 1}) || !slices.Equal(perPart, make([]int64, 4)) {
			t.Errorf("ceiling %q: ReadOutbox per partition %v, Checkpoint/LastSeq %v; want reads of 2 and 3 only, no per-partition position",
				ceiling, reads, perPart)
		}
		want2 := []int64{1, 2}
		if ceiling != "" {
			want2 = []int64{1}
		}
		if !slices.Equal(seen[2], want2) || !slices.Equal(seen[3], []int64{1}) || len(seen[0]) != 0 {
			t.Errorf("ceiling %q: handed over %v, want partition 2 %v and 3 [1]", ceiling, seen, want2)
		}
	}
}
