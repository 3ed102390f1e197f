package repair

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// A full run over the ring: the ring read over CQL matches what nodetool says, every segment
// is recorded done after one attempt, the skipped and state tables are left out, and the
// staleness gauge goes from +Inf (never repaired) to seconds.
func TestFullRunRecordsEverySegment(t *testing.T) {
	c := cluster(t)
	const ks = "rt_full"
	makeKeyspace(t, ks, 20) // with user_events, which DefaultSkip leaves out
	ctx := context.Background()

	ring, err := ReadRing(ctx, testSession, ks)
	if err != nil {
		t.Fatal(err)
	}
	ranges, err := ring.Ranges()
	if err != nil {
		t.Fatal(err)
	}
	out, err := testNodetool.Run(ctx, testTargets(c)[0], "describering", ks)
	if err != nil {
		t.Fatal(err)
	}
	var fromNodetool []string
	for _, m := range regexp.MustCompile(`start_token:(-?\d+), end_token:(-?\d+), endpoints:\[([^\]]*)\]`).FindAllStringSubmatch(out, -1) {
		eps := strings.Split(strings.ReplaceAll(m[3], " ", ""), ",")
		slices.Sort(eps)
		fromNodetool = append(fromNodetool, m[1]+".."+m[2]+":"+strings.Join(eps, ","))
	}
	var fromCQL []string
	for _, r := range ranges {
		fromCQL = append(fromCQL, r.Start.String()+".."+r.End.String()+":"+strings.Join(r.Replicas, ","))
	}
	slices.Sort(fromNodetool)
	slices.Sort(fromCQL)
	if len(fromCQL) != 3 || !slices.Equal(fromCQL, fromNodetool) {
		t.Fatalf("ranges from CQL %v, nodetool describering %v", fromCQL, fromNodetool)
	}

	reg := prometheus.NewPedanticRegistry()
	o := testOptions(ks)
	o.Metrics = NewMetrics(reg, nil)
	r := newRepairer(t, o)
	if err := r.Observe(ctx); err != nil {
		t.Fatal(err)
	}
	if v := gauge(t, reg, "shardmart_cassandra_repair_seconds_since_complete", "t"); !math.IsInf(v, 1) {
		t.Fatalf("staleness before any repair = %v, want +Inf", v)
	}
	res, err := r.Run(ctx)
	if err != nil {
		t.Fatalf("run: %+v, %v", res, err)
	}
	t.Logf("full run: %d segments in %s", res.Segments, res.Took.Round(time.Millisecond))
	if res.Resumed || res.Segments != 6 || res.Repaired != 6 || res.State != RunDone || !slices.Equal(res.Tables, []string{"t"}) {
		t.Fatalf("result %+v: want a new run of 6 segments of table t, all repaired, done", res)
	}
	run, segs := segmentsOf(t, ks)
	if run.State != RunDone || run.Finished.IsZero() || len(segs) != 6 {
		t.Fatalf("run %+v with %d segments: want done, finished, 6", run, len(segs))
	}
	for _, s := range segs {
		if s.State != SegDone || s.Attempts != 1 || s.Duration <= 0 || s.LastError != "" || !slices.Contains(s.Replicas, s.Coordinator) {
			t.Errorf("segment %+v: want done on one of its replicas after one attempt", s)
		}
	}
	if v := gauge(t, reg, "shardmart_cassandra_repair_seconds_since_complete", "t"); v < 0 || v > res.Took.Seconds()+5 {
		t.Errorf("staleness after the run = %v s, want at most the run's %s", v, res.Took)
	}
	if v := gauge(t, reg, "shardmart_cassandra_table_gc_grace_seconds", "t"); v != 864000 {
		t.Errorf("gc_grace_seconds gauge = %v, want 864000", v)
	}
	if v := testutil.ToFloat64(o.Metrics.segmentsDone.WithLabelValues(ks)); v != 6 {
		t.Errorf("segments done counter = %v, want 6", v)
	}
	if v := testutil.ToFloat64(o.Metrics.progress.WithLabelValues(ks)); v != 1 {
		t.Errorf("progress = %v, want 1", v)
	}
	// The lease is given back: another repairer can start at once.
	if l, held, err := NewStore(testSession, stateKS).Lease(ctx); err != nil || held {
		t.Errorf("lease after the run: %+v held=%v err=%v, want released", l, held, err)
	}
}

// gauge reads one table's sample of a metric.
func gauge(t *testing.T, reg prometheus.Gatherer, name, table string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "table" && l.GetValue() == table {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s for table %s", name, table)
	return 0
}

// A repairer process SIGKILLed mid-segment: a second repairer started while it ran is refused,
// naming it; once it is dead, a new repairer takes its lease over, resumes the same run, and
// repairs only the segments not done (those done keep their single attempt and time; the one
// left running is tried again).
func TestKilledRepairerResumesAndLeaseExcludes(t *testing.T) {
	c := cluster(t)
	const ks = "rt_kill"
	makeKeyspace(t, ks, 20)
	ctx := context.Background()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+ks, "REPAIRTEST_CLUSTER_DIR="+c.Dir())
	var stderr strings.Builder
	child.Stderr = &stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	t.Cleanup(func() { _ = child.Process.Kill() })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("repairer process's log:\n%s", stderr.String())
		}
	})
	childAlive := func() {
		select {
		case err := <-exited:
			t.Fatalf("repairer process exited early: %v\n%s", err, stderr.String())
		default:
		}
	}
	waitFor(t, 3*time.Minute, "the repairer process to start its run", func() bool {
		childAlive()
		_, segs := segmentsOf(t, ks)
		return len(segs) > 0
	})
	// Two repairers at once: the second is refused and names the first.
	_, err := newRepairer(t, testOptions(ks)).Run(ctx)
	var held *LeaseHeldError
	if !errors.As(err, &held) || held.Lease.PID != child.Process.Pid || !strings.Contains(err.Error(), held.Lease.Holder) {
		t.Fatalf("second repairer: %v; want the lease held by pid %d, named", err, child.Process.Pid)
	}

	// Stopped (SIGSTOP) before the check, so the segment seen running is still running when
	// the SIGKILL comes.
	waitFor(t, 3*time.Minute, "the repairer process to finish 2 segments and run a third", func() bool {
		childAlive()
		if _, segs := segmentsOf(t, ks); count(segs, SegDone) < 2 || count(segs, SegRunning) != 1 {
			return false
		}
		if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if _, segs := segmentsOf(t, ks); count(segs, SegRunning) == 1 {
			return true
		}
		_ = child.Process.Signal(syscall.SIGCONT)
		return false
	})
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	run, before := segmentsOf(t, ks)
	doneBefore := count(before, SegDone)
	if doneBefore == len(before) || count(before, SegRunning) != 1 {
		t.Fatalf("killed with %d of %d segments done and %d running; want one running", doneBefore, len(before), count(before, SegRunning))
	}
	t.Logf("killed with %d of %d segments done, %d running", doneBefore, len(before), count(before, SegRunning))

	r := newRepairer(t, testOptions(ks))
	res, err := r.Run(ctx)
	if err != nil {
		t.Fatalf("resumed run: %+v, %v", res, err)
	}
	if !res.Resumed || res.Run != run.ID || res.Repaired != len(before)-doneBefore || res.State != RunDone {
		t.Fatalf("result %+v: want run %s resumed, %d segments repaired now", res, run.ID, len(before)-doneBefore)
	}
	_, after := segmentsOf(t, ks)
	for i, s := range after {
		b := before[i]
		switch {
		case s.State != SegDone:
			t.Errorf("segment %d is %s after the resumed run", s.ID, s.State)
		case b.State == SegDone && (s.Attempts != b.Attempts || !s.Updated.Equal(b.Updated)):
			t.Errorf("segment %d was done before the kill (attempts %d at %s) and was redone (attempts %d at %s)",
				s.ID, b.Attempts, b.Updated, s.Attempts, s.Updated)
		case b.State == SegRunning && s.Attempts != b.Attempts+1:
			t.Errorf("segment %d was running when the repairer died (attempt %d): now %d attempts, want one more", s.ID, b.Attempts, s.Attempts)
		}
	}
}

// A replica frozen (SIGSTOP) during a segment: the segment times out, is retried (on another
// coordinator) after backoff, and the run completes once the node is thawed.
func TestFrozenNodeSegmentTimesOutAndIsRetried(t *testing.T) {
	c := cluster(t)
	const ks = "rt_frozen"
	makeKeyspace(t, ks, 20)
	const frozen = 2
	t.Cleanup(func() { _ = c.ResumeNode(frozen) })
	o := testOptions(ks)
	o.Segments = 3
	o.SegmentTimeout = 5 * time.Second
	o.MaxAttempts = 8
	o.Backoff = 500 * time.Millisecond
	r := newRepairer(t, o)
	type result struct {
		res Result
		err error
	}
	ended := make(chan result, 1)
	go func() {
		res, err := r.Run(context.Background())
		ended <- result{res, err}
	}()
	waitFor(t, 3*time.Minute, "a segment to start", func() bool {
		_, segs := segmentsOf(t, ks)
		return count(segs, SegRunning) > 0
	})
	if err := c.PauseNode(frozen); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	var timedOut SegmentState
	waitFor(t, time.Minute, "a segment to time out", func() bool {
		_, segs := segmentsOf(t, ks)
		for _, s := range segs {
			if strings.Contains(s.LastError, "timed out") {
				timedOut = s
				return true
			}
		}
		return false
	})
	if err := c.ResumeNode(frozen); err != nil {
		t.Fatal(err)
	}
	t.Logf("segment %d timed out %s after the freeze: %s", timedOut.ID, time.Since(frozenAt).Round(time.Millisecond), timedOut.LastError)
	var got result
	select {
	case got = <-ended:
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not end within 3 minutes of the thaw")
	}
	if got.err != nil || got.res.State != RunDone {
		t.Fatalf("run: %+v, %v; want done", got.res, got.err)
	}
	_, segs := segmentsOf(t, ks)
	s := segs[timedOut.ID]
	if s.State != SegDone || s.Attempts < 2 || s.LastError != "" {
		t.Fatalf("timed-out segment after the run: %+v; want done after 2 or more attempts", s)
	}
}

// Pause, resume and abort through the state table, as `cassandra repair pause|resume|abort`
// does: paused, no segment starts; resumed, segments go on; aborted, the repairer stops with
// ErrAborted and the run stays aborted.
func TestPauseResumeAbort(t *testing.T) {
	cluster(t)
	const ks = "rt_ctl"
	makeKeyspace(t, ks, 20)
	ctx := context.Background()
	st := NewStore(testSession, stateKS)
	ended := make(chan error, 1)
	go func() {
		_, err := newRepairer(t, testOptions(ks)).Run(ctx)
		ended <- err
	}()
	var run RunInfo
	waitFor(t, time.Minute, "the first segment done", func() bool {
		var segs []SegmentState
		run, segs = segmentsOf(t, ks)
		return count(segs, SegDone) >= 1
	})
	if err := st.Pause(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	if err := st.Pause(ctx, run.ID); err == nil || !strings.Contains(err.Error(), "is paused") {
		t.Fatalf("pausing a paused run: %v, want a refusal", err)
	}
	// Whatever ran when the pause came finishes; then nothing moves.
	var paused []SegmentState
	waitFor(t, time.Minute, "the running segment to finish", func() bool {
		_, paused = segmentsOf(t, ks)
		return count(paused, SegRunning) == 0
	})
	time.Sleep(2 * time.Second) // a paused run must stay still: there is no event to wait for
	if _, segs := segmentsOf(t, ks); count(segs, SegDone) != count(paused, SegDone) || count(segs, SegRunning) != 0 {
		t.Fatalf("segments moved while paused: %d done then %d, %d running", count(paused, SegDone), count(segs, SegDone), count(segs, SegRunning))
	}
	if err := st.Resume(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "a segment done after resume", func() bool {
		_, segs := segmentsOf(t, ks)
		return count(segs, SegDone) > count(paused, SegDone)
	})
	if err := st.Abort(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, ErrAborted) {
			t.Fatalf("repairer after abort: %v, want ErrAborted", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the repairer did not stop within a minute of the abort")
	}
	if got, _ := st.Run(ctx, run.ID); got.State != RunAborted || got.Finished.IsZero() {
		t.Fatalf("run after abort: %+v, want aborted and finished", got)
	}
}

// The delete that one replica missed: rows written at ALL, one node stopped, the rows deleted
// at QUORUM (no hints kept), the node restarted. Before repair the node still answers the rows
// at ONE (the resurrection gc_grace guards against); after a repair run every node answers
// none, also after a flush and a major compaction.
func TestRepairPropagatesTombstones(t *testing.T) {
	c := cluster(t)
	const ks = "rt_tomb"
	makeKeyspace(t, ks, 10)
	ctx := context.Background()
	const missed = 2
	addr := c.Nodes()[missed].Addr
	// No hints: the coordinators would hand the deletes to the node when it is back, which is
	// what hinted handoff is for, and what repair must do without.
	for i := range missed {
		if _, err := c.Nodetool(ctx, i, "disablehandoff"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.Nodetool(context.Background(), i, "enablehandoff") })
	}
	if err := c.KillNode(ctx, missed); err != nil {
		t.Fatal(err)
	}
	// Until a coordinator's failure detector marks the node down, it still queues mutations
	// for it, and a node back within the write timeout receives them: the deletes are only
	// missed when they are sent after both coordinators see the node down.
	for i := range missed {
		waitSeesDown(t, ctx, c, i, addr)
	}
	for k := range 5 {
		if err := testSession.Query("DELETE FROM "+ks+".t WHERE k = ?", k).Consistency(gocql.Quorum).WithContext(ctx).Exec(); err != nil {
			t.Fatalf("delete at QUORUM with a node down: %v", err)
		}
	}
	if err := c.StartNode(ctx, missed); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rowsAtOne(t, addr, ks); n != 10 {
		t.Fatalf("node %s answers %d rows at ONE before repair; want all 10 (it missed the deletes)", addr, n)
	}
	o := testOptions(ks)
	o.Segments = 3
	if res, err := newRepairer(t, o).Run(ctx); err != nil {
		t.Fatalf("repair: %+v, %v", res, err)
	}
	var wg sync.WaitGroup
	for i, n := range c.Nodes() {
		if got := rowsAtOne(t, n.Addr, ks); got != 5 {
			t.Errorf("node %s answers %d rows at ONE after repair; want 5", n.Addr, got)
		}
		wg.Go(func() {
			// A major compaction merges the repaired tombstones with the old rows: within
			// gc_grace the tombstones are kept, and win.
			_, err := c.Nodetool(ctx, i, "flush", ks)
			if err == nil {
				_, err = c.Nodetool(ctx, i, "compact", ks)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, n := range c.Nodes() {
		if got := rowsAtOne(t, n.Addr, ks); got != 5 {
			t.Errorf("node %s answers %d rows at ONE after compaction; want 5", n.Addr, got)
		}
	}
}

// waitSeesDown waits until node i's ring view marks the node at addr down (DN in nodetool status).
func waitSeesDown(t *testing.T, ctx context.Context, c *launcher.Cluster, i int, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		out, err := c.Nodetool(ctx, i, "status")
		if err == nil {
			for _, line := range strings.Split(out, "\n") {
				if f := strings.Fields(line); len(f) > 1 && f[0] == "DN" && f[1] == addr {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("node %d does not see %s down: %v (last status: %s)", i+1, addr, ctx.Err(), out)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// rowsAtOne counts ks.t's rows read at ONE through node addr alone (coordinator and, with every
// node a replica, the replica it reads).
func rowsAtOne(t *testing.T, addr, ks string) int {
	t.Helper()
	cfg := gocql.NewCluster(addr)
	cfg.HostFilter = gocql.WhiteListHostFilter(addr)
	cfg.Consistency = gocql.One
	cfg.Timeout = 10 * time.Second
	cfg.Logger = gocql.NewLogger(gocql.LogLevelNone)
	s, err := cfg.CreateSession()
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	defer s.Close()
	n := 0
	iter := s.Query("SELECT k FROM " + ks + ".t").Iter()
	var k int
	for iter.Scan(&k) {
		n++
	}
	if err := iter.Close(); err != nil {
		t.Fatalf("read at ONE on %s: %v", addr, err)
	}
	return n
}
