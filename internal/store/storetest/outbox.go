package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/outbox"
)

// OutboxStore is a fresh, empty outbox and the products repository that appends to it (a
// created product appends product.changed in its transaction). Fresh, because pruning deletes
// whatever the test's consumers have passed, and other tests' rows must not be in the way.
type OutboxStore struct {
	Products catalog.Repository
	Outbox   outbox.Log
}

// appendN appends n product.changed messages by creating n products.
func appendN(t *testing.T, s OutboxStore, n int) {
	t.Helper()
	for range n {
		if err := s.Products.CreateProduct(context.Background(), newProduct(slug("o"), "1.00", nil)); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
}

// consume reads every partition to its end under consumer and saves its checkpoints.
func consume(t *testing.T, log outbox.Log, consumer string) int {
	t.Helper()
	p := outbox.NewProjector(log, consumer, nil)
	n, err := p.Drain(context.Background())
	if err != nil {
		t.Fatalf("consume as %s: %v", consumer, err)
	}
	return n
}

// Outbox is the outbox pruning contract: outbox.Prune deletes exactly the rows every
// registered consumer has passed, through each backend's DeleteOutbox, and never one a
// consumer still needs, even racing appends and consumers.
func Outbox(t *testing.T, newStore func(t *testing.T) OutboxStore) {
	t.Run("prune waits for every consumer and keeps LastSeq", func(t *testing.T) { outboxPruneWaitsForConsumers(t, newStore) })
	t.Run("race prune append consume", func(t *testing.T) { outboxPruneRace(t, newStore) })
	t.Run("no consumer, no pruning", func(t *testing.T) { outboxNoConsumerNoPrune(t, newStore) })
}

func outboxPruneWaitsForConsumers(t *testing.T, newStore func(t *testing.T) OutboxStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	consumers := []string{"fast", "slow"}
	appendN(t, s, 20)
	lastBefore, err := s.Outbox.LastSeq(ctx)
	if err != nil || lastBefore == 0 {
		t.Fatalf("last seq %d, %v", lastBefore, err)
	}
	if res, err := outbox.Prune(ctx, s.Outbox, consumers); err != nil || res.Deleted != 0 || res.Behind != 20 {
		t.Fatalf("prune before any consumer read: %+v, %v; want nothing deleted, 20 behind", res, err)
	}
	consume(t, s.Outbox, "fast")
	res, err := outbox.Prune(ctx, s.Outbox, consumers)
	if err != nil || res.Deleted != 0 || res.HeldBy != "slow" || res.Behind != 20 {
		t.Errorf("prune with slow at 0: %+v, %v; want nothing deleted, held by slow 20 behind", res, err)
	}
	st, err := outbox.ReadStats(ctx, s.Outbox, consumers)
	if err != nil || st.Rows != 20 || st.OldestUnconsumed.IsZero() || time.Since(st.OldestUnconsumed) > time.Hour+time.Since(base) {
		t.Errorf("stats while slow is behind: %+v, %v; want 20 rows and an oldest unconsumed time", st, err)
	}
	consume(t, s.Outbox, "slow")
	appendN(t, s, 3) // unconsumed by both: must stay
	res, err = outbox.Prune(ctx, s.Outbox, consumers)
	if err != nil || res.Deleted != 20 {
		t.Errorf("prune after both read 20: %+v, %v; want 20 deleted", res, err)
	}
	if n, err := s.Outbox.CountOutbox(ctx); err != nil || n != 3 {
		t.Errorf("rows left: %d, %v; want the 3 unconsumed", n, err)
	}
	if got := consume(t, s.Outbox, "fast"); got != 3 {
		t.Errorf("fast read %d after the prune, want the 3 new rows", got)
	}
	consume(t, s.Outbox, "slow")
	if res, err := outbox.Prune(ctx, s.Outbox, consumers); err != nil || res.Deleted != 3 || res.Behind != 0 {
		t.Errorf("prune when all is consumed: %+v, %v; want 3 deleted, none behind", res, err)
	}
	st, err = outbox.ReadStats(ctx, s.Outbox, consumers)
	if err != nil || st.Rows != 0 || !st.OldestUnconsumed.IsZero() {
		t.Errorf("stats when empty: %+v, %v", st, err)
	}
	// An emptied outbox still knows how far it went: seqs are never reused and the store
	// is not taken for empty (serve would seed it again).
	if last, err := s.Outbox.LastSeq(ctx); err != nil || last != lastBefore+3 {
		t.Errorf("last seq after pruning everything: %d, %v; want %d", last, err, lastBefore+3)
	}
	appendN(t, s, 1)
	if got := consume(t, s.Outbox, "fast"); got != 1 {
		t.Errorf("after an empty outbox a new row is read %d times, want once (seq reused?)", got)
	}
}

func outboxPruneRace(t *testing.T, newStore func(t *testing.T) OutboxStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	consumers := []string{"a", "b"}
	// Every append is a new product, so a message per key: each consumer must see every
	// key; a row pruned before a consumer read it would be missing.
	type seen struct {
		mu   sync.Mutex
		last map[string]int64
		n    int
	}
	var (
		appended atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		errs     = make(chan error, 16)
	)
	views := map[string]*seen{}
	for _, c := range consumers {
		v := &seen{last: map[string]int64{}}
		views[c] = v
		p := outbox.NewProjector(s.Outbox, c, nil)
		p.Handle(outbox.TopicProductChanged, func(_ context.Context, m outbox.Message) error {
			v.mu.Lock()
			defer v.mu.Unlock()
			if _, dup := v.last[m.Key]; !dup {
				v.n++
			}
			v.last[m.Key] = m.Seq
			return nil
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			drainUntil(ctx, p, stop, errs)
		}()
	}
	wg.Add(1)
	go func() { // the pruner
		defer wg.Done()
		for {
			if _, err := outbox.Prune(ctx, s.Outbox, consumers); err != nil {
				errs <- err
				return
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	var writers sync.WaitGroup
	for range 4 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for range 30 {
				if err := s.Products.CreateProduct(ctx, newProduct(slug("r"), "1.00", nil)); err != nil {
					errs <- err
					return
				}
				appended.Add(1)
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for c, v := range views {
		if int64(v.n) != appended.Load() {
			t.Errorf("consumer %s saw %d distinct messages of %d appended: pruning deleted rows it had not read", c, v.n, appended.Load())
		}
	}
	if _, err := outbox.Prune(ctx, s.Outbox, consumers); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Outbox.CountOutbox(ctx); err != nil || n != 0 {
		t.Errorf("after everyone read everything and a last prune %d rows remain (%v)", n, err)
	}
}

// drainUntil drains p until stop is closed, then once more to read what came before it; the
// first error goes to errs.
func drainUntil(ctx context.Context, p *outbox.Projector, stop <-chan struct{}, errs chan<- error) {
	for {
		if _, err := p.Drain(ctx); err != nil {
			errs <- err
			return
		}
		select {
		case <-stop:
			if _, err := p.Drain(ctx); err != nil {
				errs <- err
			}
			return
		default:
		}
	}
}

func outboxNoConsumerNoPrune(t *testing.T, newStore func(t *testing.T) OutboxStore) {
	t.Parallel()
	ctx := context.Background()
	s := newStore(t)
	appendN(t, s, 2)
	res, err := outbox.Prune(ctx, s.Outbox, nil)
	if err != nil || res.Deleted != 0 {
		t.Errorf("prune with no registered consumer: %+v, %v", res, err)
	}
	if n, _ := s.Outbox.CountOutbox(ctx); n != 2 {
		t.Errorf("%d rows left, want 2", n)
	}
}
