package launcher

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A node's first boot takes the fresh-ring shortcuts with its native port open at once; once
// its system keyspace is on disk, it starts as production does, native port closed.
func TestRestartStartsAsProduction(t *testing.T) {
	c, err := New(Options{Dir: t.TempDir(), BaseAddr: "127.0.0.33", Logger: slog.Default()})
	if err != nil {
		t.Fatal(err)
	}
	n := c.nodes[0]
	shortcuts := []string{"-Dcassandra.skip_wait_for_gossip_to_settle=0", "-Dcassandra.ring_delay_ms=5000"}
	for _, a := range shortcuts {
		if !slices.Contains(serverArgs(c, n), a) {
			t.Errorf("first boot: %s missing", a)
		}
	}
	if !strings.Contains(cassandraYAML(c, n), "start_native_transport: true") {
		t.Error("first boot: native port not opened at start")
	}
	if err := os.MkdirAll(filepath.Join(n.DataDir(), "data", "system"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !n.HasData() {
		t.Fatal("a node with a system keyspace on disk reports no data")
	}
	for _, a := range shortcuts {
		if slices.Contains(serverArgs(c, n), a) {
			t.Errorf("restart: %s still passed", a)
		}
	}
	if !strings.Contains(cassandraYAML(c, n), "start_native_transport: false") {
		t.Error("restart: native port opened at start, before the node sees its peers")
	}
}

// The restart view follows the node's own log from its start: the last verdict on each peer,
// and whether start-up finished with the native port left closed.
func TestReadRestartView(t *testing.T) {
	dir := t.TempDir()
	n := Node{Dir: dir}
	if err := os.MkdirAll(n.LogDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	before := "INFO  [GossipStage:1] 2026-11-27 19:00:00,000 Gossiper.java:1 - InetAddress /127.0.0.9:7000 is now UP\n"
	since := strings.Join([]string{
		"INFO  [GossipStage:1] 2026-11-27 19:41:49,341 Gossiper.java:1 - InetAddress /127.0.0.21:7000 is now UP",
		"INFO  [GossipStage:1] 2026-11-27 19:41:49,427 Gossiper.java:1 - InetAddress /127.0.0.23:7000 is now UP",
		"INFO  [GossipTasks:1] 2026-11-27 19:41:50,000 Gossiper.java:1 - InetAddress /127.0.0.23:7000 is now DOWN",
		"INFO  [main] 2026-11-27 19:41:59,000 CassandraDaemon.java:1 - Not starting native transport as requested. Use JMX (StorageService->startNativeTransport()) or nodetool (enablebinary) to start it",
	}, "\n") + "\n"
	if err := os.WriteFile(n.SystemLog(), []byte(before+since), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := readRestartView(n, int64(len(before)))
	if err != nil {
		t.Fatal(err)
	}
	if !v.setUp {
		t.Error("start-up with the native port closed not seen")
	}
	want := map[string]bool{"127.0.0.21": true, "127.0.0.23": false}
	if len(v.up) != len(want) || v.up["127.0.0.21"] != true || v.up["127.0.0.23"] != false {
		t.Errorf("peers %v, want %v (a verdict before the start does not count; the last one wins)", v.up, want)
	}
}
