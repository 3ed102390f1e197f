package cli

import (
	"bytes"
	"strings"
	"testing"
)

// execRoot runs the shardmart command line args with an empty stdin and returns what it wrote
// to stdout and stderr.
func execRoot(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRootCmd(IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errOut.String(), err
}
