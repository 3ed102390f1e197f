package cli

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The backup and restore themselves run against real clusters in internal/cassandra/snapshot;
// these cover the flags.

func runBackupRestore(t *testing.T, verb *cobra.Command, args ...string) error {
	t.Helper()
	group := &cobra.Command{Use: args[0]}
	group.AddCommand(verb)
	root := newRootCmd(IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	root.AddCommand(group)
	root.SetArgs(args)
	return root.Execute()
}

func TestBackupCassandraFlags(t *testing.T) {
	var got backupCassandraOptions
	cmd := func() *cobra.Command {
		return newCmdBackupCassandra(IO{}, func(_ context.Context, o backupCassandraOptions) error { got = o; return nil })
	}
	if err := runBackupRestore(t, cmd(), "backup", "cassandra"); err == nil || !strings.Contains(err.Error(), "--out is required") {
		t.Errorf("without --out: got %v, want --out is required", err)
	}
	err := runBackupRestore(t, cmd(), "backup", "cassandra", "--out", "/b", "--cassandra-hosts", "10.0.0.1,10.0.0.2", "--cassandra-keyspace", "shop", "--cassandra-dir", "/c")
	if err != nil {
		t.Fatal(err)
	}
	if got.Out != "/b" || !slices.Equal(got.Hosts, []string{"10.0.0.1", "10.0.0.2"}) || got.Keyspace != "shop" || got.ClusterDir != "/c" {
		t.Errorf("got %+v", got)
	}
}

func TestRestoreCassandraFlags(t *testing.T) {
	var got restoreCassandraOptions
	cmd := func() *cobra.Command {
		return newCmdRestoreCassandra(IO{}, func(_ context.Context, o restoreCassandraOptions) error { got = o; return nil })
	}
	if err := runBackupRestore(t, cmd(), "restore", "cassandra"); err == nil || !strings.Contains(err.Error(), "--from is required") {
		t.Errorf("without --from: got %v, want --from is required", err)
	}
	if err := runBackupRestore(t, cmd(), "restore", "cassandra", "--from", "/b", "--rf", "12"); err == nil || !strings.Contains(err.Error(), "--rf") {
		t.Errorf("--rf 12: got %v, want a rejection", err)
	}
	if err := runBackupRestore(t, cmd(), "restore", "cassandra", "--from", "/b", "--cassandra-hosts", "10.0.0.9"); err != nil {
		t.Fatal(err)
	}
	if got.From != "/b" || got.RF != 0 || got.Keyspace != "" || got.Parallel != 2 || !slices.Equal(got.Hosts, []string{"10.0.0.9"}) {
		t.Errorf("defaults: got %+v, want rf 0 (min(3, nodes)), the backup's keyspace, parallel 2", got)
	}
}
