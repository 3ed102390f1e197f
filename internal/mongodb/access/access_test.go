package access

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// The server's Unauthorized wording becomes the command, the database and the built-in role
// that grants it. (The live refusals are in internal/store/mongostore and mongocollect.)
func TestUnauthorizedNamesTheRole(t *testing.T) {
	for _, c := range []struct{ msg, want string }{
		{`not authorized on admin to execute command { replSetGetStatus: 1, $db: "admin" }`,
			"mongodb: not authorized to run replSetGetStatus on admin: the user needs the clusterMonitor role (on admin)"},
		{`not authorized on admin to execute command { aggregate: 1, pipeline: [ { $currentOp: { allUsers: true } } ] }`,
			"mongodb: not authorized to run aggregate on admin: the user needs the clusterMonitor role (on admin)"},
		{`not authorized on config to execute command { find: "shards", filter: {} }`,
			"mongodb: not authorized to run find on config: the user needs the read role on config (or readWrite)"},
		{`not authorized on shop to execute command { insert: "carts", ordered: true }`,
			"mongodb: not authorized to run insert on shop: the user needs the readWrite role on shop"},
		{`not authorized on admin to execute command { _configsvrBalancerStatus: 1, $db: "admin" }`,
			"mongodb: not authorized to run _configsvrBalancerStatus on admin: an internal command, which only cluster members " +
				"(the keyFile's identity) may send; connect through a mongos, which sends it for you"},
		{`something else entirely`, "mongodb: not authorized (a role is missing): open: (Unauthorized) something else entirely"},
	} {
		err := fmt.Errorf("open: %w", mongo.CommandError{Code: codeUnauthorized, Name: "Unauthorized", Message: c.msg})
		got := Explain(err)
		var refused *Error
		if !errors.As(got, &refused) || refused.Kind != Unauthorized || got.Error() != c.want {
			t.Errorf("Explain(%q) = %v, want %q", c.msg, got, c.want)
		}
		var ce mongo.CommandError
		if !errors.As(got, &ce) {
			t.Errorf("the driver's error is not reachable through %v", got)
		}
	}
}

// Anything that is not a refusal of access comes back unchanged.
func TestOtherErrorsUnchanged(t *testing.T) {
	for _, err := range []error{nil, io.EOF, fmt.Errorf("insert: %w", mongo.CommandError{Code: 11000, Message: "E11000 duplicate key"})} {
		if got := Explain(err); got != err {
			t.Errorf("Explain(%v) = %v, want it unchanged", err, got)
		}
	}
}
