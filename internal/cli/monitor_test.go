package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// runMonitorCmd runs `monitor args…` with a stub in place of the exporter and returns the
// options it would have run with.
func runMonitorCmd(t *testing.T, args ...string) (monitorOptions, error) {
	t.Helper()
	var got monitorOptions
	var out bytes.Buffer
	root := newRootCmd(IO{In: strings.NewReader(""), Out: &out, Err: &out})
	root.AddCommand(newCmdMonitor(IO{Out: &out, Err: &out}, func(_ context.Context, o monitorOptions) error {
		got = o
		return nil
	}))
	root.SetArgs(append([]string{"monitor"}, args...))
	return got, root.Execute()
}

func TestMonitorFlags(t *testing.T) {
	t.Setenv("SHARDMART_MONGO_URI", "")
	t.Setenv("SHARDMART_CASSANDRA_HOSTS", "")
	t.Setenv("SHARDMART_ADDR", "0.0.0.0:8080") // serve's address: must not move the monitor
	o, err := runMonitorCmd(t, "--mongo-uri", "mongodb://127.0.0.1:27019/?replicaSet=cfg")
	if err != nil {
		t.Fatal(err)
	}
	want := monitorOptions{Addr: "127.0.0.1:9108", MongoURI: "mongodb://127.0.0.1:27019/?replicaSet=cfg",
		HotFloorBytes: 64 << 20, ChunkMoveWindow: time.Hour, ScrapeTimeout: 10 * time.Second, PageInterval: 15 * time.Second}
	if o != want {
		t.Errorf("defaults: got %+v, want %+v", o, want)
	}
	o, err = runMonitorCmd(t, "--cassandra-hosts", "127.0.0.1, 127.0.0.2", "--once", "--addr", "",
		"--hot-floor-bytes", "1048576", "--chunk-move-window", "15m", "--scrape-timeout", "3s", "--page-interval", "5s")
	if err != nil {
		t.Fatal(err)
	}
	if h := o.cassandraHosts(); len(h) != 2 || h[1] != "127.0.0.2" || !o.Once || o.HotFloorBytes != 1<<20 ||
		o.ChunkMoveWindow != 15*time.Minute || o.ScrapeTimeout != 3*time.Second || o.PageInterval != 5*time.Second {
		t.Errorf("given: got %+v (hosts %q)", o, h)
	}

	t.Setenv("SHARDMART_MONGO_URI", "mongodb://mongos:27017")
	if o, err = runMonitorCmd(t); err != nil || o.MongoURI != "mongodb://mongos:27017" {
		t.Errorf("from the environment: mongo-uri %q, %v", o.MongoURI, err)
	}
	t.Setenv("SHARDMART_MONGO_URI", "")

	bad := []struct {
		args []string
		want string
	}{
		{nil, "nothing to monitor"},
		{[]string{"--cassandra-hosts", " , "}, "nothing to monitor"},
		{[]string{"--mongo-uri", "localhost:27017"}, "--mongo-uri"},
		{[]string{"--mongo-uri", "mongodb://h", "--hot-floor-bytes", "-1"}, "--hot-floor-bytes"},
		{[]string{"--mongo-uri", "mongodb://h", "--hot-floor-bytes", "64MiB"}, "hot-floor-bytes"},
		{[]string{"--mongo-uri", "mongodb://h", "--chunk-move-window", "0s"}, "--chunk-move-window"},
		{[]string{"--mongo-uri", "mongodb://h", "--scrape-timeout", "-1s"}, "--scrape-timeout"},
		{[]string{"--mongo-uri", "mongodb://h", "--page-interval", "100ms"}, "--page-interval"},
		{[]string{"--mongo-uri", "mongodb://h", "--addr", ""}, "--addr"},
		{[]string{"--mongo-uri", "mongodb://h", "--page-interval", "100ms"}, "--page-interval"},
		{[]string{"--mongo-uri", "mongodb://h", "--page-interval", "-1s"}, "--page-interval"},
		{[]string{"--mongo-uri", "mongodb://h", "extra"}, "unknown command"},
		{[]string{"--mongo-uri", "mongodb://h", "--advise-uri", "mongos:27017"}, "--advise-uri"},
		{[]string{"--mongo-uri", "mongodb://h", "--advise-uri", "mongodb://u:pa/ss@mongos"}, "--advise-uri"},
	}
	for _, b := range bad {
		if _, err := runMonitorCmd(t, b.args...); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("monitor %q: err = %v, want one naming %q", b.args, err, b.want)
		}
	}
}
