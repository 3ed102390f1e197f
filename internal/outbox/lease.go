package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Several API processes run a projector under one consumer name. Drains that overlap are not
// harmless: a process applying an older message of a key after another process applied a newer
// one (a slow drain replaying a batch) writes the older state over the newer (a read model's
// price, a history entry's status). So a Log several processes share (MongoDB) is drained by
// one projector at a time: the drainer holds the consumer's lease, renews it between batches,
// gives each batch only what remains of it (the batch's context ends a margin before the
// lease), and releases it when done. A holder that dies leaves it to expire (LeaseTTL), and
// the next drain takes it over. The embedded store needs none: one process opens it.

// Leaser is a Log whose drains are leased.
type Leaser interface {
	// AcquireLease takes consumer's drain lease for holder until until, or extends it when
	// holder has it: ok is false while another holder's lease runs. takenOver reports that
	// the lease taken was another holder's, expired (that holder died or stalled mid-drain).
	AcquireLease(ctx context.Context, consumer, holder string, until time.Time) (ok, takenOver bool, err error)
	// ReleaseLease ends holder's lease, if it still has it.
	ReleaseLease(ctx context.Context, consumer, holder string) error
}

// LeaseTTL is how long a drain lease lasts unless renewed: the longest a dead holder keeps
// the others (and their Sync) waiting. leaseMargin is how long before its end a batch must be
// done, so no handler runs once another process may have taken over.
const (
	LeaseTTL    = 5 * time.Second
	leaseMargin = time.Second
)

// LeaseStats count what happened to this projector's drain leases.
type LeaseStats struct {
	Acquired  int64 // drains run under the lease
	Busy      int64 // drains that found another process draining
	TakenOver int64 // leases taken from a holder that let them expire
}

type leaseCounters struct{ acquired, busy, takenOver atomic.Int64 }

// LeaseStats reports the lease counters (zero when the log is not leased).
func (p *Projector) LeaseStats() LeaseStats {
	return LeaseStats{Acquired: p.leases.acquired.Load(), Busy: p.leases.busy.Load(), TakenOver: p.leases.takenOver.Load()}
}

// processHolder names this process's projectors as lease holders.
func processHolder() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// lease is a held drain lease; the partitions' drains share it.
type lease struct {
	l Leaser
	p *Projector

	mu    sync.Mutex
	until time.Time
}

// acquireLease takes the lease; with wait it retries until it has it (Sync must drain
// itself), else it gives up at once (the holder's drain does the work).
func (p *Projector) acquireLease(ctx context.Context, l Leaser, wait bool) (*lease, error) {
	for {
		until := time.Now().Add(LeaseTTL)
		ok, takenOver, err := l.AcquireLease(ctx, p.consumer, p.holder, until)
		if err != nil {
			return nil, fmt.Errorf("outbox: acquire drain lease: %w", err)
		}
		if ok {
			p.leases.acquired.Add(1)
			if takenOver {
				p.leases.takenOver.Add(1)
				p.logger.Warn("took over the outbox drain lease of a holder that let it expire", "consumer", p.consumer, "holder", p.holder)
			}
			return &lease{l: l, p: p, until: until}, nil
		}
		p.leases.busy.Add(1)
		if !wait {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// batchDeadline is when the next batch must be done: a margin before the lease ends, the
// lease renewed first once half of it is gone.
func (ls *lease) batchDeadline(ctx context.Context) (time.Time, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if time.Until(ls.until) < LeaseTTL/2 {
		until := time.Now().Add(LeaseTTL)
		ok, _, err := ls.l.AcquireLease(ctx, ls.p.consumer, ls.p.holder, until)
		if err == nil && !ok {
			err = fmt.Errorf("lost the lease (expired while draining)")
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("outbox: renew drain lease: %w", err)
		}
		ls.until = until
	}
	return ls.until.Add(-leaseMargin), nil
}

func (ls *lease) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := ls.l.ReleaseLease(ctx, ls.p.consumer, ls.p.holder); err != nil {
		ls.p.logger.Warn("release the outbox drain lease (it expires by itself)", "err", err)
	}
}
