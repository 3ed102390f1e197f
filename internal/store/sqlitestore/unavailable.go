package sqlitestore

import (
	"errors"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/shardmart/shardmart/internal/store"
)

// transientCodes are SQLite's primary result codes (mattn/go-sqlite3 error.go) for a database
// that another connection holds: the lock clears by itself once that writer commits. Each
// covers its extended codes (SQLITE_BUSY_RECOVERY, SQLITE_BUSY_SNAPSHOT, SQLITE_BUSY_TIMEOUT,
// SQLITE_LOCKED_SHAREDCACHE, ...). Reaching us, they already outlasted the busy timeout
// (drivers.go). Every other code (a constraint, a full disk, a corrupt file, misuse) is ours to
// fix and stays a 500.
var transientCodes = []struct {
	code   sqlite3.ErrNo
	reason string
}{
	{sqlite3.ErrBusy, "the database file is locked by another writer past the busy timeout (SQLITE_BUSY)"},
	{sqlite3.ErrLocked, "a table is locked by another connection (SQLITE_LOCKED)"},
}

// Unavailable wraps in store.ErrUnavailable a SQLite error with one of transientCodes, so the
// API answers 503 with Retry-After; anything else is returned as it is (placement reads the
// context errors). The driver's error stays reachable with errors.As.
func Unavailable(err error) error {
	var se sqlite3.Error
	if err == nil || errors.Is(err, store.ErrUnavailable) || !errors.As(err, &se) {
		return err
	}
	for _, c := range transientCodes {
		if se.Code == c.code {
			return &store.UnavailableError{Reason: c.reason, RetryAfter: time.Second, Err: err}
		}
	}
	return err
}
