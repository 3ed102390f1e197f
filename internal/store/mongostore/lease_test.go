package mongostore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/outbox"
)

// TestOutboxDrainLease: the lease is one holder's at a time, extended by its holder, refused
// to others while it runs, taken over once it expires (and said so), and free once released.
func TestOutboxDrainLease(t *testing.T) {
	ctx := context.Background()
	s, _ := liveStore(t)
	a, b := s.Outbox().(outbox.Leaser), sameDatabase(t, s).Outbox().(outbox.Leaser)
	expect := func(what string, l outbox.Leaser, holder string, until time.Time, wantOK, wantTaken bool) {
		t.Helper()
		ok, taken, err := l.AcquireLease(ctx, "projector", holder, until)
		if err != nil || ok != wantOK || taken != wantTaken {
			t.Fatalf("%s: ok %v taken over %v err %v; want %v %v", what, ok, taken, err, wantOK, wantTaken)
		}
	}
	short := time.Now().Add(500 * time.Millisecond)
	expect("first lease", a, "p1", short, true, false)
	expect("another process while it runs", b, "p2", time.Now().Add(5*time.Second), false, false)
	expect("its holder extends it", a, "p1", short, true, false)
	time.Sleep(time.Until(short) + 50*time.Millisecond) // let it expire: p1 "died"
	expect("another process after it expired", b, "p2", time.Now().Add(5*time.Second), true, true)
	expect("the old holder, back", a, "p1", time.Now().Add(5*time.Second), false, false)
	if err := b.ReleaseLease(ctx, "projector", "p2"); err != nil {
		t.Fatal(err)
	}
	expect("anyone after a release", a, "p1", time.Now().Add(5*time.Second), true, false)
}

// TestProjectorsShareTheDrainLease: two processes' projectors on one outbox never drain at
// once: while one applies, the other's Drain leaves the work to it and its Sync waits, then
// finds everything applied; each message is applied once.
func TestProjectorsShareTheDrainLease(t *testing.T) {
	ctx := context.Background()
	s, _ := liveStore(t)
	other := sameDatabase(t, s)
	for i := range 5 {
		if err := s.Products().CreateProduct(ctx, catalog.Product{ID: fmt.Sprintf("lease-%d", i), Name: "x", Category: "lease",
			Price: 100, Stock: map[string]int64{"eu": 1}}); err != nil {
			t.Fatal(err)
		}
	}
	var applied, running, overlaps atomic.Int64
	entered, release := make(chan struct{}, 1), make(chan struct{})
	handler := func(first bool) outbox.Handler {
		return func(context.Context, outbox.Message) error {
			if running.Add(1) > 1 {
				overlaps.Add(1)
			}
			defer running.Add(-1)
			if first {
				select {
				case entered <- struct{}{}:
					<-release
				default:
				}
			}
			applied.Add(1)
			return nil
		}
	}
	pa, pb := outbox.NewProjector(s.Outbox(), "lease-test", nil), outbox.NewProjector(other.Outbox(), "lease-test", nil)
	pa.Workers, pb.Workers = 1, 1
	pa.Handle(outbox.TopicProductChanged, handler(true))
	pb.Handle(outbox.TopicProductChanged, handler(false))
	drained := make(chan error, 1)
	go func() { _, err := pa.Drain(ctx); drained <- err }()
	<-entered // pa holds the lease, blocked in its first message
	if n, err := pb.Drain(ctx); n != 0 || err != nil {
		t.Errorf("Drain while another process drains: %d applied, %v; want 0, nil", n, err)
	}
	synced := make(chan error, 1)
	go func() { synced <- pb.Sync(ctx) }()
	select {
	case err := <-synced:
		t.Fatalf("Sync returned (%v) while another process held the lease", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if applied.Load() != 5 || overlaps.Load() != 0 {
		t.Errorf("%d applications, %d overlapping; want 5, none", applied.Load(), overlaps.Load())
	}
	if st := pb.LeaseStats(); st.Busy == 0 || st.Acquired == 0 {
		t.Errorf("second projector's lease stats %+v: want busy and then acquired", st)
	}
}
