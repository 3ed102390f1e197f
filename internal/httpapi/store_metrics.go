package httpapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NewStoreObserver returns the hook for placement.Options.Observe: repository operation
// latency by backend, operation ("carts.put_item", the same on every backend) and outcome,
// registered on reg. Labels are bounded: a few backends, the repository methods, two outcomes.
func NewStoreObserver(reg prometheus.Registerer) func(backend, op string, d time.Duration, err error) {
	return storeHistogram(reg, "shardmart_store_operation_duration_seconds",
		"Store repository operation latency by backend, operation (<family>.<method>) and outcome (ok, error).", "op")
}

// NewStatementObserver returns the hook for placement.Options.ObserveStatement: the optional
// backend-specific detail below the operations (a Cassandra statement "select.user_carts", a
// MongoDB command "find"), whose names differ per backend and so live in a metric of their own.
func NewStatementObserver(reg prometheus.Registerer) func(backend, statement string, d time.Duration, err error) {
	return storeHistogram(reg, "shardmart_store_statement_duration_seconds",
		"Store statement (Cassandra CQL) or wire command (MongoDB) latency by backend, statement and outcome (ok, error).", "statement")
}

func storeHistogram(reg prometheus.Registerer, name, help, what string) func(backend, label string, d time.Duration, err error) {
	h := registerOrReuse(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    name,
		Help:    help,
		Buckets: latencyBuckets,
	}, []string{"backend", what, "outcome"}))
	return func(backend, label string, d time.Duration, err error) {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		h.WithLabelValues(backend, label, outcome).Observe(d.Seconds())
	}
}
