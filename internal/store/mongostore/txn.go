package mongostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
)

// Error labels the server (or the driver, for network errors) attaches; the convenient
// transaction API (Session.WithTransaction) retries on them.
const (
	labelTransient     = "TransientTransactionError"
	labelUnknownCommit = "UnknownTransactionCommitResult"
)

// txnOptions: snapshot reads give one consistent view across shards; majority write concern
// makes the commit durable across a failover; transactions read from the primary.
func txnOptions() *options.TransactionOptionsBuilder {
	return options.Transaction().
		SetReadConcern(readconcern.Snapshot()).
		SetWriteConcern(writeconcern.Majority()).
		SetReadPreference(readpref.Primary())
}

// inTxn runs fn in one multi-document transaction with the driver's convenient API's retries:
// fn runs again from the start on TransientTransactionError (write conflicts with a concurrent
// transaction, a primary stepping down, a network error before commit) and the commit alone is
// sent again on UnknownTransactionCommitResult, for up to txnRetryFor. fn must therefore be
// safe to run again: it reads everything it decides on inside the transaction and keeps no
// state outside it except what it overwrites on every run. Errors from fn must wrap driver
// errors with %w so their labels stay visible to the retry loop; domain errors carry no label
// and abort at once.
//
// The loop is Session.WithTransaction's, with one difference: the commit runs under ctx.
// WithTransaction commits under a context without the caller's deadline, so a commit sent to
// a primary that froze waited until it resumed (orders answered 201 up to 19 s into a 10 s
// request deadline in the fault tests). A commit cut short by ctx has an unknown outcome, which
// the callers already handle (an order's Idempotency-Key claim, the checkout lease).
func (s *Store) inTxn(ctx context.Context, fn func(ctx context.Context) error) error {
	sess, err := s.client.StartSession()
	if err != nil {
		return fmt.Errorf("mongo: start session: %w", err)
	}
	defer func() {
		// Ending a session still in a transaction aborts it: bounded like any abort.
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortWait)
		sess.EndSession(ectx)
		cancel()
	}()
	err = runTxn(ctx, sess, fn)
	if err != nil && classify(err) != noRetry {
		// The retries ended (time or ctx); say so rather than pass on a bare label.
		return fmt.Errorf("mongo: transaction failed after the retries (%s): %w", classify(err), err)
	}
	return err
}

// txnRetryFor bounds the re-runs and commit retries, as the convenient API does (120 s); the
// request's deadline normally ends them much sooner.
const txnRetryFor = 120 * time.Second

// abortWait bounds the abort of a failed run: best effort (the server drops an abandoned
// transaction after its transactionLifetimeLimitSeconds anyway), and it must not hold a
// request on a frozen primary.
const abortWait = time.Second

func runTxn(ctx context.Context, sess *mongo.Session, fn func(ctx context.Context) error) error {
	began := time.Now()
	var backoff time.Duration
	for {
		if err := sess.StartTransaction(txnOptions()); err != nil {
			return fmt.Errorf("mongo: start transaction: %w", err)
		}
		err := fn(mongo.NewSessionContext(ctx, sess))
		if err == nil && ctx.Err() != nil {
			err = ctx.Err() // nothing sent yet: abort rather than commit past the deadline
		}
		if err != nil {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortWait)
			_ = sess.AbortTransaction(actx)
			cancel()
		} else if err = commit(ctx, sess, began); err == nil {
			return nil
		}
		if classify(err) != retryTxn || ctx.Err() != nil || time.Since(began) > txnRetryFor {
			return err
		}
		// Back off a little between runs (as the driver does), so conflicting transactions
		// do not meet again at once.
		backoff = min(max(2*backoff, 5*time.Millisecond), 500*time.Millisecond)
		t := time.NewTimer(rand.N(backoff) + time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// commit sends commitTransaction under ctx, again while its outcome is unknown.
func commit(ctx context.Context, sess *mongo.Session, began time.Time) error {
	for {
		err := sess.CommitTransaction(ctx)
		if err == nil || classify(err) != retryCommit || ctx.Err() != nil || time.Since(began) > txnRetryFor {
			return err
		}
	}
}

// retryClass says how the convenient API treats an error fn or the commit returned.
type retryClass int

const (
	noRetry     retryClass = iota
	retryTxn               // TransientTransactionError: the whole transaction runs again
	retryCommit            // UnknownTransactionCommitResult: commitTransaction is sent again
)

func (c retryClass) String() string {
	return [...]string{"no retry", "retry transaction", "retry commit"}[c]
}

// classify mirrors Session.WithTransaction's decisions; runTxn acts on them. Tests pin it
// against real server replies, and the mock-deployment tests check the loop acts on them.
func classify(err error) retryClass {
	var le mongo.LabeledError
	if !errors.As(err, &le) {
		return noRetry
	}
	switch {
	case le.HasErrorLabel(labelTransient):
		return retryTxn
	case le.HasErrorLabel(labelUnknownCommit):
		var ce mongo.CommandError
		if errors.As(err, &ce) && ce.IsMaxTimeMSExpiredError() {
			return noRetry
		}
		return retryCommit
	}
	return noRetry
}

// dupIndex reports whether err is a duplicate-key error and, for a multi-document insert, the
// index of the first document that collided (-1 when unknown).
func dupIndex(err error) (int, bool) {
	if !mongo.IsDuplicateKeyError(err) {
		return -1, false
	}
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) {
		for _, we := range bwe.WriteErrors {
			if we.Code == 11000 || we.Code == 11001 {
				return we.Index, true
			}
		}
	}
	return -1, true
}
