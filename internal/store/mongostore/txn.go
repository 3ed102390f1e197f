package mongostore

import (
	"context"
	"errors"
	"fmt"

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

// inTxn runs fn in one multi-document transaction through the driver's convenient API, which
// re-runs fn from the start on TransientTransactionError (write conflicts with a concurrent
// transaction, a primary stepping down, a network error before commit) and retries the commit
// alone on UnknownTransactionCommitResult, for up to 120 s. fn must therefore be safe to run
// again: it reads everything it decides on inside the transaction and keeps no state outside
// it except what it overwrites on every run. Errors from fn must wrap driver errors with %w so
// their labels stay visible to the retry loop; domain errors carry no label and abort at once.
func (s *Store) inTxn(ctx context.Context, fn func(ctx context.Context) error) error {
	sess, err := s.client.StartSession()
	if err != nil {
		return fmt.Errorf("mongo: start session: %w", err)
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	_, err = sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
		return nil, fn(ctx)
	}, txnOptions())
	if err != nil && classify(err) != noRetry {
		// The convenient API stops retrying after 120 s; say so rather than pass on a bare label.
		return fmt.Errorf("mongo: transaction failed after the driver's retries (%s): %w", classify(err), err)
	}
	return err
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

// classify mirrors Session.WithTransaction's decisions; tests pin it against real server
// replies, and the mock-deployment tests check the driver acts on them.
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
