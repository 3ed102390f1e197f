package cassandrastore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// Attempt is one attempt of one statement on one coordinator, as the driver's observer saw it
// end: what a stall is made of when a request takes seconds.
type Attempt struct {
	Statement   string // statementName: "<verb>.<table>", or "batch"
	Consistency string
	LWT         bool
	Host        string
	Start, End  time.Time
	Err         error
	// N is the driver's index of the attempt within the statement (0 the first); first
	// executions, speculative executions and retries share it.
	N int
	// Speculative and Retries are the statement's speculative executions and retries the
	// client policy had started when this attempt ended.
	Speculative, Retries int
	// Suspect is whether the client's host health held Host suspect when the attempt ended;
	// HostUp whether the driver had it up.
	Suspect, HostUp bool
}

func (a Attempt) String() string {
	lwt := ""
	if a.LWT {
		lwt = " LWT"
	}
	err := "ok"
	if a.Err != nil {
		err = a.Err.Error()
	}
	return fmt.Sprintf("%s %s%s on %s (up %v, suspect %v) #%d spec %d retries %d, %s +%s: %s",
		a.Statement, a.Consistency, lwt, a.Host, a.HostUp, a.Suspect, a.N, a.Speculative, a.Retries,
		a.Start.Format("15:04:05.000"), a.End.Sub(a.Start).Round(time.Millisecond), err)
}

// WithAttemptLog returns ctx whose statements, run by a store from Open, report each attempt to
// fn, for diagnosis (the fault tests show those of the requests in a stall). fn runs on the
// driver's goroutines, possibly after the call returned (a speculative execution that lost),
// and must be quick.
func WithAttemptLog(ctx context.Context, fn func(Attempt)) context.Context {
	return context.WithValue(ctx, attemptLogKey{}, fn)
}

type attemptLogKey struct{}

func attemptLog(ctx context.Context) func(Attempt) {
	fn, _ := ctx.Value(attemptLogKey{}).(func(Attempt))
	return fn
}

// stmtCounts are one statement's speculative executions and retries, for its attempts' log.
type stmtCounts struct{ speculative, retries atomic.Int32 }

type stmtCountsKey struct{}

// withCounts gives a logged statement's context its counts; nil when ctx is not logged.
func withCounts(ctx context.Context) (context.Context, *stmtCounts) {
	if attemptLog(ctx) == nil {
		return ctx, nil
	}
	c := &stmtCounts{}
	return context.WithValue(ctx, stmtCountsKey{}, c), c
}

// logAttempt reports one attempt to ctx's log, if any.
func (w attemptWatch) logAttempt(ctx context.Context, name string, cl gocql.Consistency, lwt bool, host *gocql.HostInfo,
	start, end time.Time, n int, err error) {
	fn := attemptLog(ctx)
	if fn == nil {
		return
	}
	a := Attempt{Statement: name, Consistency: cl.String(), LWT: lwt, Host: hostKey(host),
		Start: start, End: end, Err: err, N: n}
	if c, ok := ctx.Value(stmtCountsKey{}).(*stmtCounts); ok {
		a.Speculative, a.Retries = int(c.speculative.Load()), int(c.retries.Load())
	}
	if host != nil {
		a.HostUp = host.IsUp()
		if w.health != nil {
			a.Suspect = w.health.suspect(host)
		}
	}
	fn(a)
}
