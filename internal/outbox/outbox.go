// Package outbox carries domain events written in the same transaction as the change they
// describe, and the projector that applies cross-store follow-ups from them. Handlers must be
// idempotent: the projector delivers at least once (it checkpoints after applying), so a crash
// between apply and checkpoint replays a message, never skips one.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/shardmart/shardmart/internal/tracing"
)

// Topics written by the transactional store.
const (
	TopicOrderPlaced    = "order.placed"         // payload: order JSON (order.Order)
	TopicOrderStatus    = "order.status_changed" // payload: order JSON after the change
	TopicProductChanged = "product.changed"      // payload: product JSON (catalog.Product)
)

// Message is one outbox row; Seq increases strictly in commit order within its partition.
type Message struct {
	Seq     int64
	Topic   string
	Key     string
	Payload []byte
	At      time.Time
}

// Log is the outbox as the projector reads it; it lives in the transactional store.
type Log interface {
	ReadOutbox(ctx context.Context, after int64, limit int) ([]Message, error)
	Checkpoint(ctx context.Context, consumer string) (int64, error)
	// SaveCheckpoint moves consumer's checkpoint to seq, never backwards: several processes
	// drain under one consumer name, and a slower drain finishing last must not take it back.
	SaveCheckpoint(ctx context.Context, consumer string, seq int64) error
	// LastSeq is the highest seq ever appended; pruning never lowers it.
	LastSeq(ctx context.Context) (int64, error)
	// CountOutbox is how many rows the log holds now.
	CountOutbox(ctx context.Context) (int64, error)
	// DeleteOutbox deletes the rows with seq <= through and returns how many it deleted. Only
	// Prune calls it: it alone decides what every consumer has passed.
	DeleteOutbox(ctx context.Context, through int64) (int64, error)
}

// Partitioned is a Log kept as independent partitions, each with its own sequence and its own
// checkpoints, so that writers of different keys never contend on one counter (the MongoDB
// outbox: one counter document would serialise every order cluster-wide). A key always lands in
// the same partition, so the messages of one key keep their commit order; messages of different
// keys have no order, which no handler needs (each projects one key's aggregate).
type Partitioned interface {
	Partitions() []Log
}

// Positions is a Partitioned log that reads every partition's last seq, or one consumer's
// checkpoint in every partition, in one round trip, in Partitions() order. The projector and
// the tail ask it where the partitions stand and read only those that moved: asked one
// partition at a time, MongoDB's 16 partitions cost 16 round trips per drain, per lag check
// and per tail poll, nearly all of them finding nothing new.
type Positions interface {
	LastSeqs(ctx context.Context) ([]int64, error)
	Checkpoints(ctx context.Context, consumer string) ([]int64, error)
}

// Parts returns l's partitions: l.Partitions() when l is Partitioned, otherwise l itself.
func Parts(l Log) []Log {
	if p, ok := l.(Partitioned); ok {
		return p.Partitions()
	}
	return []Log{l}
}

// Handler applies one message; it must tolerate seeing the same message again.
type Handler func(ctx context.Context, m Message) error

// Projector applies outbox messages in order, one consumer checkpoint.
type Projector struct {
	log      Log
	consumer string
	handlers map[string][]Handler // entry handlers (apply.go)
	refresh  map[string][]Handler // refresh handlers (apply.go)
	claims   claims
	logger   *slog.Logger
	batch    int
	// Workers is how many keys of a batch are applied at once (default 16), partitions being
	// drained at once too; 1 applies one message at a time.
	Workers int

	mu   sync.Mutex // one Drain at a time keeps messages in order
	wake chan struct{}

	// Sync's group drain: callers that arrive while a drain runs share the next one.
	syncMu sync.Mutex
	// drained is closed when the running Sync drain finishes (nil while none runs): a channel,
	// not a sync.Cond, so a waiter can give up when its context ends.
	drained  chan struct{}
	started  uint64 // drains started by Sync
	finished uint64 // the generation of the last finished Sync drain
	syncErr  error  // its error
	syncCut  bool   // it ran out of its time bound: its error says nothing of the waiters' messages
	// drainLimit bounds each drain Sync or Run starts (RunDrainTimeout).
	drainLimit time.Duration
	// OnApplied, if set, observes every applied message (metrics, tests).
	OnApplied func(m Message)

	holder string // this projector as a drain lease holder (lease.go)
	leases leaseCounters
	obsMu  sync.Mutex // serialises OnApplied
}

// NewProjector reads log under the given consumer name.
func NewProjector(log Log, consumer string, logger *slog.Logger) *Projector {
	if logger == nil {
		logger = slog.Default()
	}
	p := &Projector{log: log, consumer: consumer, handlers: map[string][]Handler{}, refresh: map[string][]Handler{},
		logger: logger, batch: 256, Workers: 16, wake: make(chan struct{}, 1), holder: processHolder(),
		drainLimit: RunDrainTimeout}
	return p
}

// Sync returns once a drain that started after the call has finished, so everything the
// caller committed before calling is applied (read-your-writes). Concurrent callers share
// drains: while one runs, later callers wait and the first of them starts one more for all.
// The drain runs detached from the caller that started it, bounded by RunDrainTimeout: a
// caller whose ctx ends returns ctx's error at once, whether it started the drain or waits on
// another's, and the drain goes on for the others (a caller must never answer past its own
// deadline, and one caller giving up must not cut the drain everyone waits on). A drain cut by
// its own bound kept its progress but may not have reached the caller's messages: the caller
// waits for another drain then, until its ctx ends.
func (p *Projector) Sync(ctx context.Context) (err error) {
	if sctx, sp := tracing.Child(ctx, "projector.sync", tracing.KindSync); sp != nil {
		ctx = sctx
		defer func() { tracing.End(sp, err) }()
	}
	p.syncMu.Lock()
	need := p.started + 1 // a drain already running may have read the outbox before our commit
	for {
		for p.finished < need {
			done := p.drained
			if done == nil {
				done = make(chan struct{})
				p.drained = done
				p.started++
				gen := p.started
				dctx := context.WithoutCancel(ctx)
				go func() {
					_, derr := p.drainAll(dctx, true, p.drainLimit)
					p.syncMu.Lock()
					p.drained, p.finished, p.syncErr = nil, gen, derr
					p.syncCut = errors.Is(derr, errDrainCut)
					p.syncMu.Unlock()
					close(done)
				}()
			}
			p.syncMu.Unlock()
			endWait := tracing.Wait(ctx, "projector.wait_drain")
			select {
			case <-done:
			case <-ctx.Done():
				endWait()
				return fmt.Errorf("outbox: waiting for a drain: %w", ctx.Err())
			}
			endWait()
			p.syncMu.Lock()
		}
		if !p.syncCut {
			break
		}
		// Only one Sync drain runs at a time: the next one starts after this one finished,
		// after the caller's commit.
		need = p.finished + 1
	}
	err = p.syncErr
	p.syncMu.Unlock()
	return err
}

// errDrainCut marks the error of a drain that ran out of its own time bound.
var errDrainCut = errors.New("outbox: drain ran out of its time bound")

// Handle registers h for topic as an entry handler (see Apply); several handlers of one topic
// run in registration order. Register everything before Run, Drain or Apply.
func (p *Projector) Handle(topic string, h Handler) { p.handlers[topic] = append(p.handlers[topic], h) }

// Drain applies every message after the checkpoint of every partition and returns how many it
// applied. It checkpoints after every batch (256 messages), so a crash replays at most one
// batch per partition. On a handler error it stops, keeping each checkpoint at the last message
// of its partition before which every message is applied.
//
// On a log several processes share (Leaser) it drains under the consumer's lease; when
// another process holds it, that process's drain does the work and Drain returns 0 at once.
func (p *Projector) Drain(ctx context.Context) (int, error) { return p.drainAll(ctx, false, 0) }

// drainAll is Drain; with wait it waits for the lease instead of leaving the work to its
// holder: Sync must know its own commit is applied. A limit > 0 bounds the drain from when it
// holds the projector: time spent waiting behind a Sync's drain is not the drain's.
func (p *Projector) drainAll(ctx context.Context, wait bool, limit time.Duration) (n int, err error) {
	endWait := tracing.Wait(ctx, "projector.wait_drain_lock")
	p.mu.Lock()
	endWait()
	defer p.mu.Unlock()
	if limit > 0 {
		parent := ctx
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
		defer func() {
			if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && parent.Err() == nil {
				err = fmt.Errorf("%w: %w", errDrainCut, err)
			}
		}()
	}
	var ls *lease
	if l, ok := p.log.(Leaser); ok {
		if !wait {
			// A background drain takes the lease only when there is work: an idle one would
			// hold up every other process's Sync for nothing.
			if lag, err := p.Lag(ctx); err != nil || lag == 0 {
				return 0, err
			}
		}
		var err error
		endWait := tracing.Wait(ctx, "projector.wait_lease")
		ls, err = p.acquireLease(ctx, l, wait)
		endWait()
		if err != nil || ls == nil {
			return 0, err
		}
		defer ls.release()
	}
	parts, err := p.pending(ctx)
	if err != nil {
		return 0, err
	}
	if len(parts) == 1 || p.Workers <= 1 {
		total := 0
		for _, part := range parts {
			n, err := p.drain(ctx, part, ls)
			total += n
			if err != nil {
				return total, err
			}
		}
		return total, nil
	}
	// Partitions hold different keys: they are drained at once (as a batch's keys are, with
	// Workers > 1), so a drain (and the lease it holds) lasts a few round trips, not a few per
	// partition.
	counts := make([]int, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, part := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts[i], errs[i] = p.drain(ctx, part, ls)
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range counts {
		total += n
	}
	return total, errors.Join(errs...)
}

// partDrain is a partition to drain: from its checkpoint (from; -1: read it) up to upto (-1:
// to whatever it holds when read).
type partDrain struct {
	log        Log
	from, upto int64
}

// pending lists the partitions to drain. A log that says where its partitions stand
// (Positions) costs two concurrent reads, and only the partitions with messages past the
// checkpoint are drained, each from the checkpoint read to the last seq read; everything
// committed before the call is within those bounds. Any other log: every partition, read to
// its end.
func (p *Projector) pending(ctx context.Context) ([]partDrain, error) {
	parts := Parts(p.log)
	pos, ok := p.log.(Positions)
	if !ok || len(parts) == 1 {
		out := make([]partDrain, len(parts))
		for i, part := range parts {
			out[i] = partDrain{log: part, from: -1, upto: -1}
		}
		return out, nil
	}
	last, cps, err := readPositions(ctx, pos, p.consumer, len(parts))
	if err != nil {
		return nil, err
	}
	var out []partDrain
	for i, part := range parts {
		if last[i] > cps[i] {
			out = append(out, partDrain{log: part, from: cps[i], upto: last[i]})
		}
	}
	return out, nil
}

// readPositions reads every partition's last seq and consumer's checkpoints at once.
func readPositions(ctx context.Context, pos Positions, consumer string, n int) (last, cps []int64, err error) {
	var cpErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		cps, cpErr = pos.Checkpoints(ctx, consumer)
	}()
	last, err = pos.LastSeqs(ctx)
	<-done
	if err = errors.Join(err, cpErr); err != nil {
		return nil, nil, fmt.Errorf("outbox: read positions: %w", err)
	}
	if len(last) != n || len(cps) != n {
		return nil, nil, fmt.Errorf("outbox: positions of %d and %d partitions, want %d", len(last), len(cps), n)
	}
	return last, cps, nil
}

// drain applies one partition's messages, one key's in order. Different keys project different
// aggregates, so a batch's keys are applied concurrently (up to Workers at once): a read model
// in another store (Cassandra's catalog) then costs a round trip per Workers messages, not per
// message.
func (p *Projector) drain(ctx context.Context, pd partDrain, ls *lease) (int, error) {
	log, after := pd.log, pd.from
	if after < 0 {
		var err error
		if after, err = log.Checkpoint(ctx, p.consumer); err != nil {
			return 0, fmt.Errorf("outbox: read checkpoint: %w", err)
		}
	}
	applied := 0
	// With a known last seq the drain stops there: no read to learn that nothing follows (a
	// later message is the next drain's).
	for pd.upto < 0 || after < pd.upto {
		msgs, err := log.ReadOutbox(ctx, after, p.batch)
		if err != nil {
			return applied, fmt.Errorf("outbox: read after %d: %w", after, err)
		}
		if len(msgs) == 0 {
			return applied, nil
		}
		bctx, cancel := ctx, context.CancelFunc(func() {})
		if ls != nil {
			// Handlers run only while the lease surely holds: past it, another process may
			// be applying the same messages.
			dl, err := ls.batchDeadline(ctx)
			if err != nil {
				return applied, err
			}
			bctx, cancel = context.WithDeadline(ctx, dl)
		}
		done, err := p.applyBatch(bctx, msgs)
		cancel()
		if done > 0 {
			after = msgs[done-1].Seq
			applied += done
		}
		if err != nil {
			if done > 0 {
				// Keep the progress made even when ctx is what failed the handler.
				_ = p.saveCheckpoint(ctx, log, after)
			}
			return applied, err
		}
		if err := p.saveCheckpoint(ctx, log, after); err != nil {
			return applied, fmt.Errorf("outbox: save checkpoint %d: %w", after, err)
		}
	}
	return applied, nil
}

// saveCheckpoint records the progress of applied messages even when ctx ended meanwhile (the
// drain's deadline, a stop): lost, the batch would be applied again by the next drain.
func (p *Projector) saveCheckpoint(ctx context.Context, log Log, after int64) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	return log.SaveCheckpoint(sctx, p.consumer, after)
}

// applyBatch applies msgs (in seq order) and returns how long a prefix of them is applied: all
// of them, or on an error the messages before the first one not applied, so the checkpoint
// never passes a message that was not.
func (p *Projector) applyBatch(ctx context.Context, msgs []Message) (int, error) {
	byKey := map[string][]int{}
	var keys []string
	for i, m := range msgs {
		if _, ok := byKey[m.Key]; !ok {
			keys = append(keys, m.Key)
		}
		byKey[m.Key] = append(byKey[m.Key], i)
	}
	ok := make([]bool, len(msgs))
	errs := make([]error, len(keys))
	var (
		wg       sync.WaitGroup
		obsMu    sync.Mutex
		panicked []any
		tokens   = make(chan struct{}, max(p.Workers, 1))
	)
	for k, key := range keys {
		wg.Add(1)
		tokens <- struct{}{}
		go func() {
			defer func() {
				// A handler's panic resurfaces in the caller, as when it ran there: nothing is
				// checkpointed, as in a crash.
				if r := recover(); r != nil {
					obsMu.Lock()
					panicked = append(panicked, r)
					obsMu.Unlock()
				}
				<-tokens
				wg.Done()
			}()
			for _, i := range byKey[key] {
				m := msgs[i]
				if err := p.applyMessage(ctx, m, true); err != nil {
					errs[k] = err
					return // later messages of this key wait for this one
				}
				ok[i] = true
				if p.OnApplied != nil {
					p.obsMu.Lock() // partitions are drained at once: one observer call at a time
					p.OnApplied(m)
					p.obsMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(panicked) > 0 {
		panic(panicked[0])
	}
	done := 0
	for done < len(msgs) && ok[done] {
		done++
	}
	return done, errors.Join(errs...)
}

// Notify wakes Run early; it never blocks.
func (p *Projector) Notify() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// RunDrainTimeout bounds each drain Run starts. A drain holds the projector while it runs, and
// every Sync waits for it; one stuck on a primary that a partition cut off (its packets dropped,
// no answer until the heal and the TCP retransmission after it) held up every follow-up of the
// process — history entries 19 s behind in the robustness tests, past ORD-2's 10 s. Abandoned,
// the next drain selects the new primary; a drain checkpoints every batch, so a long one keeps
// its progress and goes on at the next tick.
const RunDrainTimeout = 5 * time.Second

// Run drains on every Notify and at least every interval until ctx ends, each drain bounded
// by RunDrainTimeout. Errors are logged and retried on the next tick, so a failing follow-up
// store delays, but never loses, work.
func (p *Projector) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		_, err := p.drainAll(ctx, false, p.drainLimit)
		if err != nil && ctx.Err() == nil {
			p.logger.Warn("projector drain failed; will retry", "consumer", p.consumer, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.wake:
		}
	}
}

// Lag is how many messages are committed but not yet applied, over every partition.
func (p *Projector) Lag(ctx context.Context) (int64, error) {
	var lag int64
	if pos, ok := p.log.(Positions); ok {
		n := len(Parts(p.log))
		last, cps, err := readPositions(ctx, pos, p.consumer, n)
		if err != nil {
			return 0, err
		}
		// The two reads run concurrently: a checkpoint read after a drain passed the last seq
		// read must not cancel out another partition's lag.
		for i := range n {
			lag += max(last[i]-cps[i], 0)
		}
		return lag, nil
	}
	for _, part := range Parts(p.log) {
		last, err := part.LastSeq(ctx)
		if err != nil {
			return 0, err
		}
		cp, err := part.Checkpoint(ctx, p.consumer)
		if err != nil {
			return 0, err
		}
		lag += last - cp
	}
	return lag, nil
}
