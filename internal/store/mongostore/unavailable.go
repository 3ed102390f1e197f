package mongostore

import (
	"context"
	"errors"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/shardmart/shardmart/internal/store"
)

// transientCodes are the server's words for a replica set between primaries, a member shutting
// down, or replication running behind: the driver's own retryable codes
// (x/mongo/driver/errors.go), which it has already retried once when they reach us, plus the
// write concern timeout. Reasons are shown to clients; they name the state, not the host.
var transientCodes = []struct {
	code   int
	reason string
}{
	{10107, "the primary stepped down (NotWritablePrimary)"},
	{13435, "the member is no longer primary (NotPrimaryNoSecondaryOk)"},
	{10058, "the member is no longer primary (LegacyNotPrimary)"},
	{13436, "the member is neither primary nor secondary (NotPrimaryOrSecondary)"},
	{189, "the primary stepped down (PrimarySteppedDown)"},
	{11602, "interrupted by a replica set state change (InterruptedDueToReplStateChange)"},
	{11600, "the member is shutting down (InterruptedAtShutdown)"},
	{91, "the member is shutting down (ShutdownInProgress)"},
	{64, "the write was not replicated to a majority in time (WriteConcernFailed)"},
	{134, "majority read concern not available yet (ReadConcernMajorityNotAvailableYet)"},
	{133, "no member matches the read preference (FailedToSatisfyReadPreference)"},
	{6, "a member is unreachable (HostUnreachable)"},
	{7, "a member is unreachable (HostNotFound)"},
	{89, "a member timed out (NetworkTimeout)"},
	{9001, "a connection failed (SocketException)"},
	{262, "a member ran out of time (ExceededTimeLimit)"},
}

// retryAfter is what a client is told to wait: an election on the production settings takes
// seconds, and a retry lands on the new primary as soon as the driver sees it.
const retryAfter = time.Second

// Unavailable is the one place MongoDB's transient states become store.ErrUnavailable: a
// server answer with one of transientCodes (as a command error, a write error or a write
// concern error), a network error, a timeout (server selection found no primary in time, a
// deadline ran out waiting for one), or a transaction that still carried
// TransientTransactionError or UnknownTransactionCommitResult when the driver's retries ended.
// Anything else, a cancelled request included, is returned as it is. The driver's error stays
// reachable (errors.As), labels and all.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.Canceled) {
		return err
	}
	if reason := transientReason(err); reason != "" {
		return &store.UnavailableError{Reason: reason, RetryAfter: retryAfter, Err: err}
	}
	return err
}

func transientReason(err error) string {
	var se mongo.ServerError
	if errors.As(err, &se) {
		for _, c := range transientCodes {
			if se.HasErrorCode(c.code) {
				return c.reason
			}
		}
	}
	// commitTransaction's write concern error reaches us as the driver's own WriteCommandError
	// (Session.CommitTransaction does not convert it to a WriteException): seen as 500s when a
	// step-down interrupted a commit's wait for the majority.
	var wce driver.WriteCommandError
	if errors.As(err, &wce) {
		var codes []int64
		if wce.WriteConcernError != nil {
			codes = append(codes, wce.WriteConcernError.Code)
		}
		for _, we := range wce.WriteErrors {
			codes = append(codes, we.Code)
		}
		for _, c := range transientCodes {
			if slices.Contains(codes, int64(c.code)) {
				return c.reason
			}
		}
		for _, l := range []string{labelTransient, labelUnknownCommit, "RetryableWriteError"} {
			if wce.HasErrorLabel(l) {
				return "interrupted by a failover"
			}
		}
	}
	var sel topology.ServerSelectionError
	// The driver clears a member's pool when a dial or check to it fails (a member cut off:
	// the dial times out) and fails the operations waiting on that pool with this error.
	var cleared driver.RetryablePoolError
	switch {
	case errors.As(err, &sel):
		return "no member to send the operation to (no primary: election in progress or primary unreachable)"
	case errors.As(err, &cleared) && cleared.Retryable():
		return "connections to an unreachable member were reset"
	case mongo.IsNetworkError(err):
		return "connection to a member lost mid-operation"
	case mongo.IsTimeout(err):
		return "timed out waiting for the replica set"
	case se != nil && (se.HasErrorLabel(labelTransient) || se.HasErrorLabel(labelUnknownCommit) || se.HasErrorLabel("RetryableWriteError")):
		return "interrupted by a failover"
	}
	return ""
}
