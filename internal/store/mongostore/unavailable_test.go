package mongostore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/store"
)

// TestUnavailableReadsTransientStates: every transient state of a replica set, in the shapes
// the driver returns it (command error, write error, write concern error, network and
// selection errors, labels), becomes store.ErrUnavailable with the driver's error still
// reachable; everything else passes unchanged.
func TestUnavailableReadsTransientStates(t *testing.T) {
	cmd := func(code int32, name string, labels ...string) error {
		return mongo.CommandError{Code: code, Name: name, Message: name, Labels: labels}
	}
	transient := []struct {
		name string
		err  error
	}{
		{"NotWritablePrimary", cmd(10107, "NotWritablePrimary", "RetryableWriteError")},
		{"NotPrimaryNoSecondaryOk", cmd(13435, "NotPrimaryNoSecondaryOk")},
		{"PrimarySteppedDown", cmd(189, "PrimarySteppedDown", "RetryableWriteError")},
		{"InterruptedDueToReplStateChange", cmd(11602, "InterruptedDueToReplStateChange")},
		{"ShutdownInProgress", cmd(91, "ShutdownInProgress")},
		{"write concern timeout (wtimeout)", mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Name: "WriteConcernFailed", Code: 64, Message: "waiting for replication timed out"}}},
		{"write concern error after a step-down", mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Name: "InterruptedDueToReplStateChange", Code: 11602}}},
		{"write error NotWritablePrimary", mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 10107, Message: "not primary"}}}},
		{"commit's write concern error after a step-down", driver.WriteCommandError{WriteConcernError: &driver.WriteConcernError{Name: "InterruptedDueToReplStateChange", Code: 11602, Message: "operation was interrupted"}}},
		{"commit's write concern error labelled", fmt.Errorf("mongo: commit: %w", driver.WriteCommandError{WriteConcernError: &driver.WriteConcernError{Code: 100}, Labels: []string{"UnknownTransactionCommitResult"}})},
		{"network error mid-operation", cmd(0, "", "NetworkError", "RetryableWriteError")},
		{"no primary within the selection timeout", topology.ServerSelectionError{Wrapped: context.DeadlineExceeded}},
		{"request deadline", fmt.Errorf("mongo: insert order: %w", context.DeadlineExceeded)},
		{"transaction still transient after the driver's retries", cmd(112, "WriteConflict", "TransientTransactionError")},
		{"commit outcome unknown", cmd(50, "MaxTimeMSExpired", "UnknownTransactionCommitResult")},
		{"pool cleared after a failed dial", poolCleared{}},
	}
	for _, c := range transient {
		err := Unavailable(fmt.Errorf("mongo: place order: %w", c.err))
		var ue *store.UnavailableError
		if !errors.Is(err, store.ErrUnavailable) || !errors.As(err, &ue) || ue.Reason == "" || ue.RetryAfter <= 0 {
			t.Errorf("%s: got %v, want store.ErrUnavailable with a reason and a retry hint", c.name, err)
			continue
		}
		if !strings.Contains(err.Error(), c.err.Error()) {
			t.Errorf("%s: the driver's error is not kept in %v", c.name, err)
		}
		if again := Unavailable(err); again != err {
			t.Errorf("%s: wrapped twice: %v", c.name, again)
		}
	}
	var le mongo.LabeledError
	if err := Unavailable(cmd(10107, "NotWritablePrimary", "RetryableWriteError")); !errors.As(err, &le) || !le.HasErrorLabel("RetryableWriteError") {
		t.Errorf("labels lost: %v", err)
	}

	short := &catalog.InsufficientStockError{ProductID: "p", Zone: "eu", Requested: 2, Available: 1}
	kept := []struct {
		name string
		err  error
	}{
		{"nil", nil},
		{"cancelled by the client", fmt.Errorf("mongo: read cart: %w", context.Canceled)},
		{"duplicate key", mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 11000, Message: "E11000 duplicate key"}}}},
		{"no documents", mongo.ErrNoDocuments},
		{"domain error", short},
		{"other server error", cmd(2, "BadValue")},
	}
	for _, c := range kept {
		got := Unavailable(c.err)
		if c.err == nil && got != nil || c.err != nil && (errors.Is(got, store.ErrUnavailable) || got.Error() != c.err.Error()) {
			t.Errorf("%s: got %v, want it unchanged", c.name, got)
		}
	}
}

// TestClientOptionsKeepRetriesAndBoundConnect: Open's client retries reads and writes (the
// driver's default, which a failover relies on) and bounds a connection's dial by
// ConnectTimeout unless the URI says otherwise.
func TestClientOptionsKeepRetriesAndBoundConnect(t *testing.T) {
	o := ClientOptions("mongodb://127.0.0.1:27017/?replicaSet=rs0")
	if o.RetryWrites != nil && !*o.RetryWrites || o.RetryReads != nil && !*o.RetryReads {
		t.Errorf("retries turned off: writes %v, reads %v", o.RetryWrites, o.RetryReads)
	}
	if o.ConnectTimeout == nil || *o.ConnectTimeout != ConnectTimeout {
		t.Errorf("connect timeout %v, want %s", o.ConnectTimeout, ConnectTimeout)
	}
	o = ClientOptions("mongodb://127.0.0.1:27017/?replicaSet=rs0&connectTimeoutMS=5000")
	if *o.ConnectTimeout != 5*time.Second {
		t.Errorf("the URI's connectTimeoutMS=5000 gave %s", *o.ConnectTimeout)
	}
}

// poolCleared has the shape of the driver's (unexported) poolClearedError: what operations
// waiting on a member's pool get when a dial to that member timed out.
type poolCleared struct{}

func (poolCleared) Error() string {
	return "connection pool for 127.0.0.1:27110 was cleared because another operation failed with: dial tcp 127.0.0.1:27110: i/o timeout"
}
func (poolCleared) Retryable() bool { return true }
