package httpapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/order"
	"github.com/shardmart/shardmart/internal/session"
)

// Store operation outcomes. Only outcomeError means the store failed: an alert on store errors
// must not fire on a login without a guest cart (carts.merge finds nothing to merge) or on a
// checkout refused because the stock ran out.
const (
	outcomeOK       = "ok"
	outcomeNotFound = "not_found" // a domain ErrNotFound: the asked-for row does not exist
	outcomeRejected = "rejected"  // a domain rule refused the call (stock, state, duplicate, credentials)
	outcomeCanceled = "canceled"  // the caller went away (context.Canceled)
	outcomeError    = "error"     // anything else, a deadline included: the store did not answer
)

// storeOutcome classifies a repository call's error. Rejections are the errors toProblem
// recognises as the client's (it answers them 4xx, never 500), so the two never disagree.
func storeOutcome(err error) string {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, cart.ErrNotFound), errors.Is(err, order.ErrNotFound), errors.Is(err, session.ErrNotFound),
		errors.Is(err, account.ErrNotFound), errors.Is(err, catalog.ErrNotFound):
		return outcomeNotFound
	case errors.Is(err, context.Canceled):
		return outcomeCanceled
	}
	// A checkout that outlived its lease is settled by the cart service: expected, if rare.
	var stale *cart.StaleCheckoutError
	if errors.As(err, &stale) {
		return outcomeRejected
	}
	if _, internal := toProblem(err); !internal {
		return outcomeRejected
	}
	return outcomeError
}

// StoreOutcome is storeOutcome for the store operations' spans (placement.Options.Outcome),
// so a trace and the metric read an error the same way.
func StoreOutcome(err error) string { return storeOutcome(err) }

// statementOutcome classifies a statement or wire command: below the repositories an expected
// miss is no error (an empty SELECT, an LWT not applied), so any error is one.
func statementOutcome(err error) string {
	if err != nil {
		return outcomeError
	}
	return outcomeOK
}

// NewStoreObserver returns the hook for placement.Options.Observe: repository operation
// latency by backend, operation ("carts.put_item", the same on every backend) and outcome
// (storeOutcome), registered on reg. Labels are bounded: a few backends, the repository
// methods, five outcomes.
func NewStoreObserver(reg prometheus.Registerer) func(backend, op string, d time.Duration, err error) {
	return storeHistogram(reg, "shardmart_store_operation_duration_seconds",
		"Store repository operation latency by backend, operation (<family>.<method>) and outcome (ok, not_found, rejected, canceled, error).", "op", storeOutcome)
}

// NewStatementObserver returns the hook for placement.Options.ObserveStatement: the optional
// backend-specific detail below the operations (a Cassandra statement "select.user_carts", a
// MongoDB command "find"), whose names differ per backend and so live in a metric of their own.
func NewStatementObserver(reg prometheus.Registerer) func(backend, statement string, d time.Duration, err error) {
	return storeHistogram(reg, "shardmart_store_statement_duration_seconds",
		"Store statement (Cassandra CQL) or wire command (MongoDB) latency by backend, statement and outcome (ok, error).", "statement", statementOutcome)
}

func storeHistogram(reg prometheus.Registerer, name, help, what string, outcome func(error) string) func(backend, label string, d time.Duration, err error) {
	h := registerOrReuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    name,
		Help:    help,
		Buckets: latencyBuckets,
	}, []string{"backend", what, "outcome"}))
	// Every store call observes: each series is resolved once, not hashed and checked on
	// every call. The labels are bounded, and so is the map.
	type series struct{ backend, label, outcome string }
	var seen sync.Map // series -> prometheus.Observer
	return func(backend, label string, d time.Duration, err error) {
		k := series{backend, label, outcome(err)}
		o, ok := seen.Load(k)
		if !ok {
			o, _ = seen.LoadOrStore(k, h.WithLabelValues(k.backend, k.label, k.outcome))
		}
		o.(prometheus.Observer).Observe(d.Seconds())
	}
}
