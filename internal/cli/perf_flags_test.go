package cli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// The settings measured for the Cassandra placement reach what uses them: cassandra up's
// paxos variant the launcher, bench's connections per node the in-process server's store
// options (and a negative count is refused there, as serve refuses it).
func TestPaxosVariantAndConnsPerHostFlags(t *testing.T) {
	var up cassandraUpOptions
	cl := &cassandraClusterOptions{}
	root := newRootCmd(IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	root.AddCommand(newCassandraGroup(cl, newCmdCassandraUp(IO{}, cl, func(_ context.Context, o cassandraUpOptions) error { up = o; return nil })))
	root.SetArgs([]string{"cassandra", "up", "--paxos-variant", "v2"})
	if err := root.Execute(); err != nil || up.PaxosVariant != "v2" {
		t.Errorf("cassandra up --paxos-variant v2: %q, %v", up.PaxosVariant, err)
	}

	var got benchOptions
	cmd := newCmdBench(IO{}, func(_ context.Context, o benchOptions) error { got = o; return nil })
	if err := execUnderRoot(t, cmd, "bench", "--cassandra-conns-per-host", "4"); err != nil || got.cassandraConns != 4 {
		t.Fatalf("bench --cassandra-conns-per-host 4: %d, %v", got.cassandraConns, err)
	}
	for conns, wantErr := range map[int]bool{4: false, 0: false, -1: true} {
		b := backendFlags{cassandraConns: conns, sessionTTL: time.Hour, eventRetention: 24 * time.Hour}
		cfg, err := b.config(nil)
		if (err != nil) != wantErr {
			t.Errorf("conns %d: error %v, want error: %v", conns, err, wantErr)
		}
		if err == nil && cfg.Backends.CassandraNumConns != conns {
			t.Errorf("conns %d: the store options carry %d", conns, cfg.Backends.CassandraNumConns)
		}
	}
}
