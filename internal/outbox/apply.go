package outbox

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shardmart/shardmart/internal/tracing"
)

// A caller that committed a message applies it itself (Apply) instead of waiting for a drain:
// a drain applies everyone's messages one drain at a time, so waiting for one put every
// checkout behind the queue of everyone else's follow-ups. Two kinds of handlers:
//
//   - entry handlers (Handle) are applied once per message, by its caller or, when the caller
//     did not (it crashed, timed out, failed), by a drain;
//   - refresh handlers (Refresh) are applied by the caller and again by the drain: they copy
//     the store of record into a read model that callers of several processes could write in
//     the wrong order, and the drain, one at a time over every process (the lease), leaves
//     the model at the store's latest state.
//
// Claims keep the caller and the drain from applying a message's entry handlers at once, and
// acks tell the drain a message's entry handlers are applied. Both live in this process: a
// drain in another process applies a message this one acked again, which its handlers
// tolerate (they are idempotent and keyed by version); it only costs the writes.

type byRequestKey struct{}

// ByRequest reports whether a handler runs in the request that committed its message (Apply)
// rather than in the projector's drain, which the lease serialises across processes.
func ByRequest(ctx context.Context) bool { return ctx.Value(byRequestKey{}) != nil }

// ackTTL is how long an ack is kept: far longer than a drain takes to reach a message. An
// entry the drain reaches after its ack expired is applied again (idempotent).
const ackTTL = time.Minute

type claim struct {
	done    chan struct{} // closed when the holder finished
	applied bool          // set before done is closed
	at      time.Time
}

type claims struct {
	mu        sync.Mutex
	m         map[string]*claim
	lastSweep time.Time
}

// identity names a message without its seq, which its caller does not know.
func identity(m Message) string {
	sum := sha256.Sum256(m.Payload)
	return m.Topic + "\x00" + m.Key + "\x00" + string(sum[:])
}

// take claims id for a caller (byDrain false) or a drain. It returns the claim when the
// caller now holds it and must release it; else applied says that another holder applied the
// entry handlers. A drain consumes the ack it finds: the drain passes the message, and a later
// message that looks the same (an identical payload under one key) is another one to apply.
func (c *claims) take(ctx context.Context, id string, byDrain bool) (cl *claim, applied bool, err error) {
	for {
		c.mu.Lock()
		if c.m == nil {
			c.m = map[string]*claim{}
		}
		now := time.Now()
		if now.Sub(c.lastSweep) > ackTTL/4 {
			for k, old := range c.m {
				if old.applied && now.Sub(old.at) > ackTTL {
					delete(c.m, k)
				}
			}
			c.lastSweep = now
		}
		held := c.m[id]
		if held == nil {
			cl = &claim{done: make(chan struct{}), at: now}
			c.m[id] = cl
			c.mu.Unlock()
			return cl, false, nil
		}
		c.mu.Unlock()
		endWait := tracing.Wait(ctx, "projector.wait_claim")
		select {
		case <-held.done:
		case <-ctx.Done():
			endWait()
			return nil, false, ctx.Err()
		}
		endWait()
		if held.applied {
			if byDrain {
				c.mu.Lock()
				if c.m[id] == held {
					delete(c.m, id)
				}
				c.mu.Unlock()
			}
			return nil, true, nil
		}
		// The holder failed and released it: claim it again.
	}
}

// release ends cl. A caller's applied claim stays as the message's ack until a drain passes
// the message; a drain's, or a failed one, is dropped (its waiters still see whether it
// applied).
func (c *claims) release(id string, cl *claim, applied, keep bool) {
	c.mu.Lock()
	cl.applied, cl.at = applied, time.Now()
	if (!applied || !keep) && c.m[id] == cl {
		delete(c.m, id)
	}
	c.mu.Unlock()
	close(cl.done)
}

// Refresh registers h for topic as a refresh handler (see Apply); several run in
// registration order, after nothing and concurrently with the topic's entry handlers.
func (p *Projector) Refresh(topic string, h Handler) {
	p.refresh[topic] = append(p.refresh[topic], h)
}

// Refreshers is p as a registry whose Handle registers refresh handlers.
func (p *Projector) Refreshers() RefreshRegistry { return RefreshRegistry{p} }

// RefreshRegistry registers refresh handlers through Handle.
type RefreshRegistry struct{ p *Projector }

// Handle registers h as a refresh handler of topic.
func (r RefreshRegistry) Handle(topic string, h Handler) { r.p.Refresh(topic, h) }

// Apply applies m, which the caller committed a moment ago, right away and without waiting
// for any drain: callers of different keys never wait on each other. m's seq is not needed
// (0): the drain recognises m by topic, key and payload. When a drain or another caller is
// applying m's entry handlers, Apply waits for it and applies only what it did not. On an
// error (ctx's end included) the entry is left to the background drain, which Apply wakes in
// any case so it also runs the refresh handlers in order with every other process's.
func (p *Projector) Apply(ctx context.Context, m Message) (err error) {
	if sctx, sp := tracing.Child(ctx, "projector.apply", tracing.KindSync); sp != nil {
		ctx = sctx
		defer func() { tracing.End(sp, err) }()
	}
	defer p.Notify()
	return p.applyMessage(ctx, m, false)
}

// applyMessage applies m's entry handlers under its claim, unless they are applied already,
// and its refresh handlers, both at once; byDrain: the drain applies it.
func (p *Projector) applyMessage(ctx context.Context, m Message, byDrain bool) error {
	if !byDrain {
		ctx = context.WithValue(ctx, byRequestKey{}, true)
	}
	var refreshErr error
	var refreshPanic any
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A handler's panic reaches the goroutine that applies the message, as it would
		// without this one: a crash stays a crash, and a caller that recovers sees it.
		defer func() { refreshPanic = recover() }()
		refreshErr = runHandlers(ctx, m, p.refresh[m.Topic])
	}()
	entryErr := p.applyEntry(ctx, m, byDrain)
	<-done
	if refreshPanic != nil {
		panic(refreshPanic)
	}
	return errors.Join(entryErr, refreshErr)
}

// applyEntry runs m's entry handlers once: under m's claim, skipped when its ack says they ran.
func (p *Projector) applyEntry(ctx context.Context, m Message, byDrain bool) error {
	hs := p.handlers[m.Topic]
	if len(hs) == 0 {
		return nil
	}
	id := identity(m)
	cl, applied, err := p.claims.take(ctx, id, byDrain)
	if err != nil {
		return fmt.Errorf("outbox: wait for %s %s applied elsewhere: %w", m.Topic, m.Key, err)
	}
	if applied {
		return nil
	}
	ok := false
	defer func() { p.claims.release(id, cl, ok, !byDrain) }() // released on a panic too
	if err := runHandlers(ctx, m, hs); err != nil {
		return err
	}
	ok = true
	return nil
}

func runHandlers(ctx context.Context, m Message, hs []Handler) error {
	for _, h := range hs {
		if err := h(ctx, m); err != nil {
			return fmt.Errorf("outbox: apply %s #%d: %w", m.Topic, m.Seq, err)
		}
	}
	return nil
}
