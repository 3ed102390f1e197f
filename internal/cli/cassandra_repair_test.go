package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/shardmart/shardmart/internal/cassandra/repair"
)

func parseRepair(t *testing.T, args ...string) (cassandraRepairOptions, error) {
	t.Helper()
	var got cassandraRepairOptions
	cl := &cassandraClusterOptions{}
	root := newRootCmd(IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	root.AddCommand(newCassandraGroup(cl, newCmdCassandraRepair(IO{}, cl, func(_ context.Context, o cassandraRepairOptions) error { got = o; return nil })))
	root.SetArgs(append([]string{"cassandra", "repair"}, args...))
	return got, root.Execute()
}

// JMX targets come from the flag, the environment or a file; the JMX password from its file or
// the environment, never a flag.
func TestCassandraRepairJMXSettings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "targets")
	if err := os.WriteFile(file, []byte("# node=jmx\n10.0.0.3:7199\n10.0.0.4=127.0.0.1:7400\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(dir, "jmx.pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHARDMART_CASSANDRA_JMX_TARGETS", "10.0.0.1:7199,10.0.0.2:7199")
	o, err := parseRepair(t, "--hosts", "10.0.0.1", "--jmx-targets-file", file, "--jmx-user", "repair", "--jmx-password-file", pw)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := o.targets(nil)
	want := []repair.Target{{Node: "10.0.0.1", Host: "10.0.0.1", Port: 7199}, {Node: "10.0.0.2", Host: "10.0.0.2", Port: 7199},
		{Node: "10.0.0.3", Host: "10.0.0.3", Port: 7199}, {Node: "10.0.0.4", Host: "127.0.0.1", Port: 7400}}
	if err != nil || !slices.Equal(ts, want) {
		t.Fatalf("targets %v, %v; want %v", ts, err, want)
	}
	if c, err := o.credentials(); err != nil || c != (repair.Credentials{User: "repair", Password: "s3cret"}) {
		t.Fatalf("credentials %+v, %v; want repair/s3cret from the file", c, err)
	}
	o, _ = parseRepair(t, "--hosts", "10.0.0.1", "--jmx-user", "repair")
	if _, err := o.credentials(); err == nil || !strings.Contains(err.Error(), jmxPasswordEnv) {
		t.Fatalf("a JMX user without a password: %v; want an error naming %s", err, jmxPasswordEnv)
	}
	t.Setenv(jmxPasswordEnv, "from-env")
	if c, err := o.credentials(); err != nil || c.Password != "from-env" {
		t.Fatalf("credentials %+v, %v; want the password from %s", c, err, jmxPasswordEnv)
	}
	if _, err := parseRepair(t, "--jmx-password", "x"); err == nil {
		t.Fatal("--jmx-password was accepted: a password must never be a flag")
	}
	if _, err := parseRepair(t, "--intensity", "1.5"); err == nil || !strings.Contains(err.Error(), "--intensity") {
		t.Fatalf("--intensity 1.5: %v, want an error", err)
	}
}

func TestCassandraRepairControlNeedsRun(t *testing.T) {
	for _, verb := range []string{"pause", "resume", "abort"} {
		if _, err := runCassandra(t, "repair", verb, "--hosts", "127.0.0.1"); err == nil || !strings.Contains(err.Error(), "--run is required") {
			t.Errorf("repair %s without --run: %v", verb, err)
		}
	}
}
