package placement

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/shardmart/shardmart/internal/store"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
	"github.com/shardmart/shardmart/internal/store/mongostore"
	"github.com/shardmart/shardmart/internal/store/sqlitestore"
)

// unavailable is each backend's reading of its driver's errors: the classes a healthy cluster
// (or a lone SQLite file) heals by itself become store.ErrUnavailable with a reason naming the
// state and the level; the rest come back as they are. Each list lives beside its driver
// (cassandrastore/unavailable.go, mongostore/unavailable.go, sqlitestore/unavailable.go).
var unavailable = map[string]func(error) error{
	SQLite:    sqlitestore.Unavailable,
	Cassandra: cassandrastore.Unavailable,
	Mongo:     mongostore.Unavailable,
}

// transient is the one reading of a failed repository call's error, so that no store timeout
// reaches the API as a 500: the backend's transient states (unavailable, above), then the
// context errors that are not the caller's own giving up, become a store.UnavailableError,
// which placement stamps with the family (op's prefix: "carts", "products") and the backend.
// A call cancelled because its caller was (the HTTP client went away) stays context.Canceled.
func (t timer) transient(ctx context.Context, op string, err error) error {
	if t.unavailable != nil {
		err = t.unavailable(err)
	}
	if !errors.Is(err, store.ErrUnavailable) {
		if reason := contextReason(ctx, err); reason != "" {
			err = &store.UnavailableError{Reason: reason, RetryAfter: time.Second, Err: err}
		}
	}
	// The backends build an UnavailableError per failed call, so filling it in shares nothing;
	// one already named (by a repository this one called) keeps its own family.
	var ue *store.UnavailableError
	if errors.As(err, &ue) && ue.Family == "" {
		ue.Family, _, _ = strings.Cut(op, ".")
		ue.Backend = t.backend
	}
	return err
}

// contextReason names a context error that a retry may heal: a deadline (the store's own
// per-attempt or per-operation timeout, or the request's), or a cancellation from inside the
// store's client (a speculative attempt that lost, a pool reset) while the caller still waits.
// "" for anything else, a cancellation by the caller included.
func contextReason(ctx context.Context, err error) string {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		return ""
	}
	switch cause := ctx.Err(); {
	case errors.Is(cause, context.Canceled):
		return ""
	case errors.Is(cause, context.DeadlineExceeded):
		return "no answer before the request's deadline"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within the store's own time limit"
	}
	return "the operation was cancelled inside the store's client while the request still waited"
}
