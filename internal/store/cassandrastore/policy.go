package cassandrastore

import (
	"context"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// The client policy per statement kind. Every value is measured and explained in
// docs/cassandra.md ("Client policy").
const (
	// attemptTimeout is the driver's Timeout: how long one attempt waits for its answer when
	// nothing faster ends it (speculation, casAttemptTimeout). Above the launcher's
	// write_request_timeout (5 s), so a live coordinator reports its own timeout, with what the
	// replicas acknowledged, before the client gives up; a schema change on a loaded machine
	// also takes seconds.
	attemptTimeout = 6 * time.Second
	// maxRetries is how many times an idempotent statement that failed on one coordinator
	// (timeout, unavailable, connection lost) is sent to the next one, at once, per call.
	maxRetries = 2
	// casAttemptTimeout bounds one attempt of a lightweight transaction (a context deadline,
	// since it is never retried or speculated): past it the outcome is unknown and casLoop
	// reads at SERIAL to learn it. About twice the LWT p99 measured at load 50 on this 2-core
	// machine (1 s cut 17 % of them); a frozen coordinator is abandoned sooner (runCAS).
	casAttemptTimeout = 2 * time.Second
	// maxSpeculative is how many speculative executions an idempotent statement may start.
	maxSpeculative = 2
	// opTimeout is the hard cap on one repository call, whatever its statements do.
	opTimeout = 8 * time.Second
)

// policy applies the client policy to statements. A nil *policy is valid: idempotent
// statements then get retries but no speculation and no metrics (a session opened by the
// caller, NewStore).
type policy struct {
	health  *hostHealth    // nil: hosts unknown, no speculation
	metrics *clientMetrics // nil: not exported
	latency *recentP99     // the speculative delay per statement kind
	// specDelay replaces speculateAfter when set (tests make every statement speculate).
	specDelay time.Duration
	cl        Levels // zero: LevelsFor("")
}

// levels are the consistency levels of the store's statements.
func (p *policy) levels() Levels {
	if p == nil || p.cl == (Levels{}) {
		return LevelsFor("")
	}
	return p.cl
}

// bounded caps a repository call at opTimeout (or the caller's earlier deadline).
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, opTimeout)
}

// idempotent marks q safe to run more than once (a read, or a write of fixed values), so the
// driver may start it on a second replica once the first has taken the recent p99 of its kind,
// and send it to the next replica when a coordinator fails. Never for LWTs, counters or
// appends: a repeat could apply twice.
func (p *policy) idempotent(ctx context.Context, q *gocql.Query) *gocql.Query {
	ctx, counts := withCounts(ctx)
	return q.WithContext(ctx).Idempotent(true).SetSpeculativeExecutionPolicy(p.speculation(kindOf(q.Statement(), q.GetConsistency()), counts)).
		RetryPolicy(p.retry(ctx, counts))
}

// idempotentBatch is idempotent for a batch every entry of which is idempotent.
func (p *policy) idempotentBatch(ctx context.Context, b *gocql.Batch) *gocql.Batch {
	ctx, counts := withCounts(ctx)
	return b.WithContext(ctx).SpeculativeExecutionPolicy(p.speculation(kindOf("batch", b.GetConsistency()), counts)).RetryPolicy(p.retry(ctx, counts))
}

// counts, when not nil, receives the statement's speculative executions and retries for its
// attempt log.
func (p *policy) speculation(kind stmtKind, counts *stmtCounts) gocql.SpeculativeExecutionPolicy {
	if p == nil || p.health == nil {
		return gocql.NonSpeculativeExecution{}
	}
	return &speculation{p: p, kind: kind, counts: counts}
}

func (p *policy) retry(ctx context.Context, counts *stmtCounts) gocql.RetryPolicy {
	r := &nextHostRetry{ctx: ctx, counts: counts}
	r.left.Store(maxRetries)
	if p != nil {
		r.m = p.metrics
	}
	return r
}

// speculation is one statement's speculative execution policy: an extra execution on the next
// host after each recent p99 of its kind, as many as there are other hosts up, at most
// maxSpeculative. Two, not one: with a replica cut off and not yet convicted, a coordinator
// can wait on it too, so the first two coordinators hang while the third answers in
// milliseconds (seen in the sick-node tests: cart reads of 6 s that a third execution would
// have ended at twice the delay). With a single host the driver's extra
// execution would find no host and answer "no connections" at once, and the first answer
// wins. One value per statement, because it counts its executions: the driver asks Attempts
// once before speculating, once before waiting, and once more after each execution it starts.
type speculation struct {
	p      *policy
	kind   stmtKind
	calls  atomic.Int32
	counts *stmtCounts
}

func (s *speculation) Attempts() int {
	if s.calls.Add(1) >= 3 {
		if s.p.metrics != nil {
			s.p.metrics.speculative.Inc()
		}
		if s.counts != nil {
			s.counts.speculative.Add(1)
		}
	}
	return max(0, min(s.p.health.upHosts()-1, maxSpeculative))
}

func (s *speculation) Delay() time.Duration {
	if s.p.specDelay > 0 {
		return s.p.specDelay
	}
	if s.p.latency == nil {
		return specDefault
	}
	return s.p.latency.delay(s.kind)
}

// nextHostRetry sends an idempotent statement that failed on a coordinator to the next one at
// once (no backoff: the next host is a different machine), up to maxRetries times per call and
// never past the statement's context. The driver's ExponentialBackoffRetryPolicy sleeps with
// time.Sleep, ignoring the context. One value per statement, because it counts.
type nextHostRetry struct {
	ctx    context.Context
	left   atomic.Int32
	m      *clientMetrics
	counts *stmtCounts
}

func (r *nextHostRetry) Attempt(q gocql.RetryableQuery) bool { return q.Context().Err() == nil }

func (r *nextHostRetry) GetRetryType(err error) gocql.RetryType {
	outcome, bad := outcomeOf(err, false)
	if !bad || outcome == "cancelled" || r.ctx.Err() != nil || r.left.Add(-1) < 0 {
		return gocql.Rethrow
	}
	if r.m != nil {
		r.m.retries.Inc()
	}
	if r.counts != nil {
		r.counts.retries.Add(1)
	}
	return gocql.RetryNextHost
}
