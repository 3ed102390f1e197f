package launcher

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cacheWithJars is a fresh jar cache whose lib is the real one (no second download), so the
// class-data sharing archive is made from scratch.
func cacheWithJars(t *testing.T, ctx context.Context) string {
	t.Helper()
	lib, err := EnsureJars(ctx, DefaultCacheDir(), DefaultVersion)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	base := filepath.Join(cache, "cassandra-"+DefaultVersion)
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(lib, filepath.Join(base, "lib")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "complete"), []byte("test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return cache
}

// The archives are made once in the jar cache by a training node, the server JVM maps its
// archive, and nodetool runs with -Xshare:on (which refuses to start without its archive).
func TestClassDataSharingArchiveMadeAndUsed(t *testing.T) {
	t.Setenv(cdsEnv, "")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cache := cacheWithJars(t, ctx)
	a, err := ensureCDS(ctx, cache, DefaultVersion, CDSTestTrainAddr, false, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{a.server, a.nodetool, filepath.Join(filepath.Dir(a.server), "complete")} {
		if st, err := os.Stat(f); err != nil || (strings.HasSuffix(f, ".jsa") && st.Size() < 1<<20) {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(a.server), "train-*")); len(left) > 0 {
		t.Errorf("training directory left behind: %v", left)
	}

	c := ForTest(t, Options{Nodes: 1, BaseAddr: LauncherTestAddr, Name: "launcher-cds", CacheDir: cache})
	if c.cds != a {
		t.Fatalf("cluster uses archives %+v, want %+v", c.cds, a)
	}
	pid, ok := c.livePID(c.nodes[0])
	if !ok {
		t.Fatal("pidfile does not name a live node JVM")
	}
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(maps), a.server) {
		t.Errorf("node JVM %d does not map %s", pid, a.server)
	}
	cmd := c.nodetoolCmd(ctx, c.nodes[0], []string{"status"})
	cmd.Args = slices.Insert(cmd.Args, 1, "-Xshare:on")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("nodetool with -Xshare:on: %v\n%s", err, out)
	}
	if !upNormal(string(out))[LauncherTestAddr] {
		t.Errorf("nodetool status does not show %s UN:\n%s", LauncherTestAddr, out)
	}
}

// A failed archive attempt costs speed only: the cluster prepares without class-data sharing
// and its JVM command lines carry no archive, and the env switch turns it off.
func TestClassDataSharingFailureOnlyTurnsItOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cache := cacheWithJars(t, ctx)
	key, err := javaKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "cassandra-"+DefaultVersion, "cds-"+key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "failed"), []byte("training node did not boot\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"", "off"} {
		t.Setenv(cdsEnv, env)
		c, err := New(Options{Dir: t.TempDir(), BaseAddr: "127.0.0.32", CacheDir: cache, Logger: slog.Default()})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.prepare(ctx); err != nil {
			t.Fatalf("%s=%q: prepare: %v", cdsEnv, env, err)
		}
		if c.cds != (cdsArchives{}) {
			t.Errorf("%s=%q: archives %+v in use after a failed attempt", cdsEnv, env, c.cds)
		}
		for _, a := range append(serverArgs(c, c.nodes[0]), c.nodetoolCmd(ctx, c.nodes[0], nil).Args...) {
			if strings.Contains(a, "SharedArchiveFile") {
				t.Errorf("%s=%q: JVM argument %s without an archive", cdsEnv, env, a)
			}
		}
		if !strings.HasSuffix(serverArgs(c, c.nodes[0])[len(serverArgs(c, c.nodes[0]))-2], string(os.PathListSeparator)+c.nodes[0].ConfDir()) {
			t.Errorf("server class path does not end with the node's conf dir")
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "server.jsa")); !os.IsNotExist(err) {
		t.Errorf("a failed attempt was retried by a start: %v", err)
	}
}
