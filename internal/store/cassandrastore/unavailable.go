package cassandrastore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	storepkg "github.com/shardmart/shardmart/internal/store"
)

// transient is one class of the driver's failures that a healthy cluster heals by itself.
type transient struct {
	// outcome is the per-host metric's word for it (timeout, unavailable, connection).
	outcome string
	// reason names the class and, where the driver's error carries them, the consistency level
	// and the replica counts; "" when err is not of the class. No hosts: it is shown to clients.
	reason func(err error) string
}

// asReason matches a driver error type T anywhere in err's chain.
func asReason[T error](say func(T) string) func(error) string {
	return func(err error) string {
		var t T
		if errors.As(err, &t) {
			return say(t)
		}
		return ""
	}
}

// isReason matches one of the driver's sentinel errors.
func isReason(target error, reason string) func(error) string {
	return func(err error) string {
		if errors.Is(err, target) {
			return reason
		}
		return ""
	}
}

// transients lists, from the driver's own sources (errors.go, frame.go, conn.go, session.go,
// query_executor.go of cassandra-gocql-driver v2), every failure a healthy cluster heals by
// itself: the coordinator's answers that too few replicas were alive or answered in time, that
// it was overloaded or still bootstrapping, or that a conditional write's outcome is unknown;
// the client's own timeout waiting for the coordinator; no connection to any host; a connection
// that closed, failed or had no stream free. The host metric and the per-host health
// (outcomeOf), the retry policy and the HTTP answer (Unavailable) all read this one list.
//
// Not listed, so answered 500: the request refused as written (syntax, invalid, unauthorized,
// a missing keyspace), a value that does not marshal, a replica that failed executing it
// (read or write failure: tombstones, a bad function), and ErrSessionClosed (this process is
// shutting down and still serving: our bug).
var transients = []transient{
	{"unavailable", asReason(func(e *gocql.RequestErrUnavailable) string {
		return fmt.Sprintf("%s needs %d replicas, %d reachable", e.Consistency, e.Required, e.Alive)
	})},
	{"timeout", asReason(func(e *gocql.RequestErrWriteTimeout) string {
		if e.WriteType == "CAS" {
			return fmt.Sprintf("conditional write at %s timed out (%d of %d replicas acknowledged)", e.Consistency, e.Received, e.BlockFor)
		}
		return fmt.Sprintf("write at %s timed out (%d of %d replicas acknowledged)", e.Consistency, e.Received, e.BlockFor)
	})},
	{"timeout", asReason(func(e *gocql.RequestErrReadTimeout) string {
		return fmt.Sprintf("read at %s timed out (%d of %d replicas answered)", e.Consistency, e.Received, e.BlockFor)
	})},
	{"timeout", asReason(func(e *gocql.RequestErrCASWriteUnknown) string {
		return fmt.Sprintf("outcome of a conditional write at %s unknown (%d of %d replicas acknowledged)", e.Consistency, e.Received, e.BlockFor)
	})},
	{"unavailable", asReason(func(*gocql.RequestErrOverloaded) string { return "the coordinator is overloaded" })},
	{"unavailable", asReason(func(*gocql.RequestErrBootstrapping) string { return "the coordinator is still bootstrapping" })},
	{"timeout", isReason(gocql.ErrTimeoutNoResponse, "no answer from the coordinator within the client timeout")},
	{"connection", isReason(gocql.ErrNoConnections, "no node reachable (no connection in the pool)")},
	{"connection", isReason(gocql.ErrConnectionClosed, "the connection to the coordinator closed before it answered")},
	{"connection", isReason(gocql.ErrNoStreams, "every stream of the connection to the coordinator is in use")},
	// The driver's writer answers io.EOF when its connection closes under a request.
	{"connection", isReason(io.EOF, "the connection to the coordinator closed before it answered")},
	{"connection", isReason(io.ErrUnexpectedEOF, "the connection to the coordinator closed mid-answer")},
	// context.DeadlineExceeded is a net.Error too: the caller's deadline or ours, which
	// placement tells apart, not a network fault.
	{"connection", asReason(func(e net.Error) string {
		if errors.Is(e, context.DeadlineExceeded) {
			return ""
		}
		if e.Timeout() {
			return "a network timeout on the connection to the coordinator"
		}
		return "a network error on the connection to the coordinator"
	})},
}

// transientClass returns the first class of transients err belongs to, and its reason.
func transientClass(err error) (*transient, string) {
	for i := range transients {
		if r := transients[i].reason(err); r != "" {
			return &transients[i], r
		}
	}
	return nil, ""
}

// Unavailable wraps in store.ErrUnavailable the failures in transients, and a lightweight
// transaction whose loop could not learn its outcome or stayed contended (casError), so the API
// answers 503 with Retry-After. Context errors and everything else are returned as they are:
// placement, which sees the caller's context, reads those.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, storepkg.ErrUnavailable) {
		return err
	}
	_, reason := transientClass(err)
	var ce *casError
	switch {
	case reason != "":
	case errors.Is(err, ErrOutcomeUnknown):
		reason = "outcome of a conditional write unknown (no read could settle it)"
	case errors.As(err, &ce):
		reason = "conditional write still contended after retries"
	}
	if reason == "" {
		return err
	}
	return &storepkg.UnavailableError{Reason: reason, RetryAfter: time.Second, Err: err}
}
