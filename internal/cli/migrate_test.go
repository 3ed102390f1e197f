package cli

import (
	"bytes"
	"strings"
	"testing"
)

// Bad migrate arguments are refused before anything is opened, naming what is allowed.
func TestMigrateRefusesBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "run"}, "--family is required"},
		{[]string{"migrate", "run", "--family", "orders"}, "want one of sessions, carts, history, events, catalog"},
		{[]string{"migrate", "verify", "--family", "carts", "--to", "mongo"}, "only cassandra"},
		{[]string{"migrate", "cutover", "--family", "carts", "--from", "postgres"}, "want sqlite or mongo"},
		{[]string{"migrate", "run", "--family", "carts", "--from", "mongo"}, "--from mongo needs --mongo-uri"},
	} {
		var out bytes.Buffer
		root := NewRootCmd(IO{Out: &out, Err: &out})
		root.SetArgs(tc.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
