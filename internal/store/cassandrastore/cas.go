package cassandrastore

import (
	"context"
	"errors"
	"fmt"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/shardmart/shardmart/internal/tracing"
)

// ErrOutcomeUnknown is in the chain of an error from a lightweight transaction that timed out
// (or lost its coordinator) and whose outcome no later read could learn: the change may or may
// not have applied. The HTTP layer answers 503: the client retries, and the retry reads first.
var ErrOutcomeUnknown = errors.New("outcome of a conditional write unknown")

// maxCASAttempts bounds casLoop. Each failed round is a condition that changed (the next read
// sees why), a Paxos round that lost to concurrent ones on the partition (20 concurrent edits of
// one cart need a few rounds each) or an attempt whose outcome is unknown.
const maxCASAttempts = 12

// casAttempt is what a round of casLoop knows about the rounds before it.
type casAttempt struct {
	n int // 0 in the first round
	// cl is the consistency of the round's read: QUORUM first, SERIAL once an attempt was
	// refused or its outcome is unknown, so the read sees (and completes) what Paxos accepted.
	cl      gocql.Consistency
	refused bool // the previous attempt ran and its condition was false
	unknown bool // an earlier attempt's outcome was not learned: it may have applied
}

// casOp is one conditional statement a round proposes (a query or a batch, built on the
// call's context; casLoop gives each attempt its own deadline), and the round's result if it
// applies.
type casOp[T any] struct {
	query   *gocql.Query
	batch   *gocql.Batch
	applied func() T
	// exec, when set, runs instead of query or batch (tests of the loop itself).
	exec func(ctx context.Context) (bool, error)
}

// casDo proposes q, whose round has no result of its own.
func casDo(q *gocql.Query) *casOp[struct{}] {
	return &casOp[struct{}]{query: q, applied: func() struct{} { return struct{}{} }}
}

// casRound reads what it needs (at a.cl) and decides: a result (op nil) or an error ends the
// loop; an op is run, and the loop ends with op.applied() if it applies.
type casRound[T any] func(ctx context.Context, a casAttempt) (T, *casOp[T], error)

// casError ends a casLoop that ran out of attempts or could not learn an outcome: the
// condition is transient (contention, a sick coordinator), so Unavailable makes it a 503.
type casError struct {
	what     string
	attempts int
	unknown  bool  // the last attempt whose outcome was unknown was never settled by a read
	err      error // the failure that ended the loop, if any
}

func (e *casError) Error() string {
	switch {
	case e.unknown && e.err != nil:
		return fmt.Sprintf("%s: %v after %d attempts: %v", e.what, ErrOutcomeUnknown, e.attempts, e.err)
	case e.unknown:
		return fmt.Sprintf("%s: %v after %d attempts", e.what, ErrOutcomeUnknown, e.attempts)
	}
	return fmt.Sprintf("%s: still contended after %d attempts", e.what, e.attempts)
}

func (e *casError) Unwrap() []error {
	errs := []error{}
	if e.unknown {
		errs = append(errs, ErrOutcomeUnknown)
	}
	if e.err != nil {
		errs = append(errs, e.err)
	}
	return errs
}

// casLoop owns the retry loop of a lightweight transaction: attempts, contention re-reads, and
// unknown outcomes. A statement is never repeated blindly: after a refusal or a timeout the
// next round reads again (at SERIAL) and decides again, so a change that did apply is seen
// applied, and one that did not is proposed again against the state as it now is. Each
// attempt has casAttemptTimeout: a frozen or cut-off coordinator costs that, not the driver's
// full Timeout. A read that fails after an unknown outcome ends the loop with
// ErrOutcomeUnknown.
func casLoop[T any](ctx context.Context, p *policy, what string, round casRound[T]) (T, error) {
	a := casAttempt{cl: p.levels().Carts}
	unsettled := false // an unknown outcome not yet followed by a successful round read
	var zero T
	for ; a.n < maxCASAttempts; a.n++ {
		if a.n > 0 {
			// Each extra round shows on the operation's span (a no-op when not traced).
			trace.SpanFromContext(ctx).AddEvent(tracing.EventLWTRetry)
		}
		v, op, err := round(ctx, a)
		if err != nil {
			// A round's own decision (a domain error) stands; a failed read after an unknown
			// outcome leaves it unknown.
			if unsettled && casUnknown(err) {
				return zero, &casError{what: what, attempts: a.n, unknown: true, err: err}
			}
			return zero, err
		}
		unsettled = false
		if op == nil {
			return v, nil
		}
		applied, err := p.runCAS(ctx, op.query, op.batch, op.exec)
		switch {
		case err == nil:
			if applied {
				return op.applied(), nil
			}
			a.refused = true
		case ctx.Err() != nil:
			return zero, &casError{what: what, attempts: a.n + 1, unknown: true, err: err}
		case casUnknown(err):
			a.refused, a.unknown, unsettled = false, true, true
			if p != nil && p.metrics != nil {
				p.metrics.casUnknown.Inc()
			}
		default:
			return zero, fmt.Errorf("%s: %w", what, err)
		}
		a.cl = p.levels().Serial
	}
	return zero, &casError{what: what, attempts: a.n, unknown: unsettled}
}

// runCAS runs one attempt of a conditional query or batch under casAttemptTimeout, and
// abandons it as soon as its coordinator stalls (answers nothing for casStallAfter): a frozen
// node then costs an LWT about casStallAfter, not the whole attempt timeout. Either way the
// outcome is unknown and the next round reads at SERIAL, on another host.
func (p *policy) runCAS(ctx context.Context, q *gocql.Query, b *gocql.Batch, exec func(context.Context) (bool, error)) (bool, error) {
	actx, cancel := context.WithTimeout(ctx, casAttemptTimeout)
	defer cancel()
	if p != nil && p.health != nil {
		sent := &sentTo{}
		actx = context.WithValue(actx, sentToKey{}, sent)
		done := make(chan struct{})
		defer close(done)
		go p.health.abandonIfStalled(sent, cancel, done)
	}
	switch {
	case exec != nil:
		return exec(actx)
	case q != nil:
		return q.WithContext(actx).MapScanCASContext(actx, map[string]any{})
	}
	applied, iter, err := b.WithContext(actx).MapExecCASContext(actx, map[string]any{})
	if iter != nil {
		_ = iter.Close() // a refused batch may return one row per condition; err already holds any failure
	}
	return applied, err
}

// casUnknown reports errors after which a lightweight transaction may or may not have been
// applied: a timeout (the attempt's deadline, the driver's, or the coordinator's in any Paxos
// phase), a lost connection, or an unavailable or overloaded coordinator (Paxos may have
// accepted before the commit failed). Treating every transient failure as unknown is safe:
// the next round reads at SERIAL, which completes an accepted proposal, and decides.
func casUnknown(err error) bool {
	_, bad := outcomeOf(err, false)
	return bad
}
