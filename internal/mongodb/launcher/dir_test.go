package launcher

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// livePIDs finds every live mongod with a pidfile under dir, as DownDir does.
func livePIDs(t *testing.T, dir string) map[string]int {
	t.Helper()
	pids := map[string]int{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "mongod.pid" {
			if pid, ok := serverproc.ReadPID(path, memberMarker(filepath.Dir(path))); ok {
				pids[path] = pid
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// A directory used for a replica set and then for a sharded cluster, with a set of an older
// layout below it too: DownDir stops every one of their mongods, not just one topology's.
func TestDownDirStopsEveryTopology(t *testing.T) {
	dir := t.TempDir()
	ForTest(t, Options{Dir: dir, Members: 1, BasePort: LauncherTestPort + 3})
	ClusterForTest(t, ClusterOptions{Dir: dir, Shards: 1, BasePort: LauncherClusterTestPort})
	ForTest(t, Options{Dir: filepath.Join(dir, "old", "rs"), Name: "old", Members: 1, BasePort: LauncherTestPort + 4})
	pids := livePIDs(t, dir)
	if len(pids) != 4 {
		t.Fatalf("live mongods under the directory: %v; want 4 (set, config server, shard, old set)", pids)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	done, err := DownDir(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sharded cluster stopped: config server and 1 shard(s)", "replica set rs0 stopped", "1 other mongod(s) stopped (no set file lists them)"}
	if !slices.Equal(done, want) {
		t.Errorf("DownDir reports %q, want %q", done, want)
	}
	for pf, pid := range pids {
		// Each is this test's child: gone once its reaper has waited for it.
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Errorf("mongod %d (%s) still exists after DownDir", pid, pf)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := os.Stat(pf); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pidfile %s left: %v", pf, err)
		}
	}
	if done, err := DownDir(ctx, dir, nil); err != nil || slices.ContainsFunc(done, func(s string) bool { return strings.Contains(s, "other") }) {
		t.Errorf("a second DownDir: %q, %v; want nothing more to stop", done, err)
	}
}

// A directory holding a sharded cluster is refused, with what it holds, for anything else; the
// launcher refuses a set whose data belongs to another at once rather than after its boot
// timeout; the same topology is reused, stopped or running.
func TestUpRefusesAnotherTopologyAndReusesItsOwn(t *testing.T) {
	dir := t.TempDir()
	opts := ClusterOptions{Dir: dir, Shards: 1, BasePort: LauncherClusterTestPort}
	ClusterForTest(t, opts)
	own := Topology{Shards: 1, Members: 1, BasePort: LauncherClusterTestPort}
	held, err := Holds(dir)
	if want := (Topology{Shards: 1, Members: 1, Addr: "127.0.0.1", BasePort: LauncherClusterTestPort}); err != nil || len(held) != 1 || held[0] != want {
		t.Fatalf("Holds = %v, %v; want [%v]", held, err, want)
	}
	for _, other := range []Topology{
		{Members: 1, Name: "rs0", BasePort: LauncherClusterTestPort},
		{Shards: 2, Members: 1, BasePort: LauncherClusterTestPort},
		{Shards: 1, Members: 3, BasePort: LauncherClusterTestPort},
		{Shards: 1, Members: 1, BasePort: LauncherClusterTestPort + 1},
	} {
		err := CheckDir(dir, other)
		if !errors.Is(err, ErrOtherTopology) || !strings.Contains(err.Error(), dir+" holds a sharded cluster of 1 shard(s) of 1 member(s)") {
			t.Errorf("CheckDir for %v: %v; want ErrOtherTopology saying what %s holds", other, err, dir)
		}
	}
	if err := CheckDir(dir, own); err != nil {
		t.Fatalf("CheckDir for what the directory holds: %v", err)
	}

	// Three members per shard on one-member shard data: before, each new member waited out
	// the boot timeout for a replica set config that does not list it.
	bigger, err := NewCluster(ClusterOptions{Dir: dir, Shards: 1, MembersPerShard: 3, BasePort: LauncherClusterTestPort, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bigger.KillAll)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = bigger.Up(ctx)
	t.Logf("Up: %v", err)
	if !errors.Is(err, ErrOtherTopology) || !strings.Contains(err.Error(), filepath.Join(dir, "sh0")+" holds a shard replica set sh0 of 1 member(s)") {
		t.Fatalf("Up with 3 members per shard on 1-member shards: %v; want ErrOtherTopology naming sh0", err)
	}

	// Stopped and started again as itself: the shard is still the cluster's.
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := DownDir(ctx, dir, nil); err != nil {
		t.Fatal(err)
	}
	again, err := NewCluster(ClusterOptions{Dir: dir, Shards: 1, BasePort: LauncherClusterTestPort, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(again.KillAll)
	if err := again.Up(ctx); err != nil {
		t.Fatalf("Up of the same cluster: %v", err)
	}
	if got, err := again.RegisteredShards(ctx); err != nil || !slices.Equal(got, []string{"sh0"}) {
		t.Errorf("registered shards after a restart: %v, %v; want [sh0]", got, err)
	}
}

// A mongod that dies while starting fails Up at once with its exit status and the fatal lines
// it logged on that start, not those of an earlier start (the log is appended to).
func TestMemberThatDiesAtStartIsReportedWithItsFatalLine(t *testing.T) {
	dir := t.TempDir()
	s := ForTest(t, Options{Dir: dir, Members: 1, BasePort: LauncherTestPort + 3})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Down(ctx); err != nil {
		t.Fatal(err)
	}
	// A storage engine file from nowhere: WiredTiger refuses it, mongod fasserts.
	if err := os.WriteFile(filepath.Join(s.Members()[0].dbPath(), "WiredTiger.turtle"), []byte("not a turtle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for attempt := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := s.Up(ctx)
		cancel()
		if !errors.Is(err, serverproc.ErrExited) {
			t.Fatalf("start %d on a broken data directory: %v; want ErrExited", attempt+1, err)
		}
		msg := err.Error()
		t.Logf("start %d: %v", attempt+1, err)
		if !strings.Contains(msg, "set rs0 member 0 (127.0.0.1:") || !strings.Contains(msg, "), while starting (signal: aborted)") ||
			strings.Count(msg, "F Fatal assertion") != 1 || !strings.Contains(msg, s.Members()[0].LogPath()) {
			t.Errorf("start %d: %v; want the member, how it exited, its one fatal assertion and its log", attempt+1, err)
		}
	}
}

// A member that dies after answering, while the set elects its primary, fails Up at once; the
// two left would elect one, and Up used to report a healthy set.
func TestMemberDyingDuringTheElectionFailsUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	unlock, err := serverproc.Lock(ctx, filepath.Join(os.TempDir(), portLock(LauncherTestPort)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock) // registered before KillAll, so it runs after it: no member outlives the lock
	s, err := New(Options{Dir: t.TempDir(), Members: 3, BasePort: LauncherTestPort, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.KillAll)
	upCtx, upCancel := context.WithTimeout(ctx, 30*time.Second)
	defer upCancel()
	upErr := make(chan error, 1)
	go func() { upErr <- s.Up(upCtx) }()
	// Member 0 names its set once Up's replSetInitiate installed the config: Up now waits for
	// the election and the others' initial sync, which take seconds.
	for {
		var hello struct {
			SetName string `bson:"setName"`
		}
		err := s.withMember(ctx, 0, func(c *mongo.Client) error {
			return c.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello)
		})
		if err == nil && hello.SetName == "rs0" {
			break
		}
		select {
		case err := <-upErr:
			t.Fatalf("Up returned before the set was initiated: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := s.Kill(ctx, 1); err != nil {
		t.Fatal(err)
	}
	err = <-upErr
	t.Logf("Up: %v", err)
	if !errors.Is(err, serverproc.ErrExited) || !strings.Contains(err.Error(), "set rs0 member 1 (") || !strings.Contains(err.Error(), "(signal: killed)") {
		t.Fatalf("Up with member 1 killed during the election: %v; want ErrExited naming member 1", err)
	}
}
