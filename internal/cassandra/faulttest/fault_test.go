package faulttest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/eventually"
	sessionpkg "github.com/shardmart/shardmart/internal/session"
)

// TestClusterSeesItselfAndServesQuorum: three nodes, each sees all three UN, and a QUORUM
// write is read back at QUORUM through every coordinator.
func TestClusterSeesItselfAndServesQuorum(t *testing.T) {
	ctx := start(t)
	views := make([]string, len(cluster.Nodes()))
	var g errgroup.Group
	for i := range views {
		g.Go(func() (err error) {
			views[i], err = cluster.Nodetool(ctx, i, "status")
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for i, out := range views {
		if got := strings.Count(out, "\nUN "); got != 3 {
			t.Errorf("node %d sees %d nodes UN, want 3:\n%s", i+1, got, out)
		}
	}
	lines := cartLines("smoke", 5)
	writeRows(t, ctx, lines)
	for i := range cluster.Nodes() {
		if got := presentOn(t, ctx, i, lines, gocql.Quorum); got != len(lines) {
			t.Errorf("QUORUM read via node %d: %d of %d lines", i+1, got, len(lines))
		}
	}
}

// TestHintedHandoff (CAS-1): cart and order-history writes at QUORUM while node 3 is down
// leave hints on the coordinators; node 3 comes back without the rows (delivery paused), and
// once delivery resumes it serves every row alone at ONE. Only hints can have put them there:
// no read repair at ONE, no repair.
func TestHintedHandoff(t *testing.T) {
	ctx := start(t)
	stopNode(t, ctx, n3)
	prefix := runPrefix("hint")
	lines := append(cartLines(prefix, 20), historyEntries(prefix, 20)...)
	writeRows(t, ctx, lines)

	nodetoolAll(t, ctx, []int{n1, n2}, "pausehandoff")
	restartNode(t, ctx, n3)
	if got := presentOn(t, ctx, n3, lines, gocql.One); got != 0 {
		t.Fatalf("node 3 has %d of %d lines before any hint was delivered; the test proves nothing", got, len(lines))
	}
	nodetoolAll(t, ctx, []int{n1, n2}, "resumehandoff")
	// Delivery starts on the next 10 s dispatch round once node 3 is seen alive.
	eventuallyPresentOn(t, ctx, n3, lines, 3*time.Minute)
}

// TestReadRepair (CAS-1): with hints disabled, node 3 misses cart and order-history writes
// made while it was down; a QUORUM read coordinated by node 3 sees the mismatch, returns the
// newest data and repairs node 3 before answering (read_repair BLOCKING), so node 3 alone then
// has the rows.
func TestReadRepair(t *testing.T) {
	ctx := start(t)
	nodetoolAll(t, ctx, []int{n1, n2, n3}, "disablehandoff")
	stopNode(t, ctx, n3)
	prefix := runPrefix("rr")
	lines := append(cartLines(prefix, 15), historyEntries(prefix, 15)...)
	writeRows(t, ctx, lines)
	restartNode(t, ctx, n3)

	if got := presentOn(t, ctx, n3, lines, gocql.One); got != 0 {
		t.Fatalf("node 3 has %d of %d lines without hints; the test proves nothing", got, len(lines))
	}
	if got := presentOn(t, ctx, n3, lines, gocql.Quorum); got != len(lines) {
		t.Fatalf("QUORUM read via node 3 returned %d of %d lines", got, len(lines))
	}
	if got := presentOn(t, ctx, n3, lines, gocql.One); got != len(lines) {
		t.Fatalf("after QUORUM reads node 3 alone has %d of %d lines: read repair did not happen", got, len(lines))
	}
}

// TestSessionsAtOneSurviveANodeDown: with node 2 down every session has a replica missing
// (RF 3 on 3 nodes), yet the session repository (ONE) creates, reads and touches sessions
// without an error. ONE+ONE is eventually consistent (W+R = 2 <= RF): a read may reach the
// replica a write has not reached yet, so a client sees its write within a short bound, not
// necessarily at once; the test waits for that, as a retrying client would.
func TestSessionsAtOneSurviveANodeDown(t *testing.T) {
	ctx := start(t)
	stopNode(t, ctx, n2)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i := range 30 {
		s := sessionpkg.Session{ID: fmt.Sprintf("sess-one-%d", i), UserID: fmt.Sprintf("user-%d", i), CreatedAt: now,
			LastActive: now, ExpiresAt: now.Add(time.Hour), Status: sessionpkg.StatusActive}
		if err := sessions.CreateSession(ctx, s); err != nil {
			t.Fatalf("create session %s at ONE with node 2 down: %v", s.ID, err)
		}
		later := now.Add(time.Minute)
		eventually.NoError(t, 10*time.Second, func() error {
			if err := sessions.Touch(ctx, s.ID, later); err != nil {
				t.Fatalf("touch session %s at ONE with node 2 down: %v", s.ID, err)
			}
			got, err := sessions.GetSession(ctx, s.ID, later)
			if err != nil && !errors.Is(err, sessionpkg.ErrNotFound) {
				t.Fatalf("read session %s at ONE with node 2 down: %v", s.ID, err)
			}
			if err != nil || !got.LastActive.Equal(later) {
				return fmt.Errorf("session %s: last_active %v, err %v; want %v", s.ID, got.LastActive, err, later)
			}
			return nil
		})
	}
}

// TestAntiEntropyRepair (CAS-1): with hints off, node 3 misses cart, order-history, catalog
// and session writes made while it was down. The repair `shardmart cassandra repair` runs
// (nodetool repair -pr on every node, sessions skipped) gives node 3 every cart line, history
// entry and product (both catalog tables), read from node 3 alone, and leaves the skipped
// sessions table alone.
func TestAntiEntropyRepair(t *testing.T) {
	ctx := start(t)
	nodetoolAll(t, ctx, []int{n1, n2, n3}, "disablehandoff")
	stopNode(t, ctx, n3)
	prefix := runPrefix("ae")
	lines := append(append(cartLines(prefix, 15), historyEntries(prefix, 15)...), catalogProducts(prefix, 15)...)
	writeRows(t, ctx, lines)
	now := time.Now().UTC()
	if err := sessions.CreateSession(ctx, sessionpkg.Session{ID: prefix + "-sess", CreatedAt: now, LastActive: now,
		ExpiresAt: now.Add(time.Hour), Status: sessionpkg.StatusActive}); err != nil {
		t.Fatal(err)
	}
	restartNode(t, ctx, n3)
	if got := presentOn(t, ctx, n3, lines, gocql.One); got != 0 {
		t.Fatalf("node 3 has %d of %d lines before repair; the test proves nothing", got, len(lines))
	}

	began := time.Now()
	repaired, err := cluster.Repair(ctx, launcher.RepairOptions{Keyspace: keyspace, Skip: launcher.DefaultRepairSkip})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("repair of %v took %s", repaired, time.Since(began).Round(time.Second))
	for _, want := range []string{"user_carts", "guest_carts", "order_history", "products", "products_by_category"} {
		if !slices.Contains(repaired, want) {
			t.Errorf("repair left out %s (repaired %v)", want, repaired)
		}
	}
	for _, skipped := range []string{"sessions", "user_events"} {
		if slices.Contains(repaired, skipped) {
			t.Errorf("repair included %s (repaired %v)", skipped, repaired)
		}
	}
	if got := presentOn(t, ctx, n3, lines, gocql.One); got != len(lines) {
		t.Fatalf("after repair node 3 alone has %d of %d lines", got, len(lines))
	}
	id, err := hostID(n3)
	if err != nil {
		t.Fatal(err)
	}
	var status string
	err = session.Query(`SELECT status FROM `+keyspace+`.sessions WHERE session_id = ?`, prefix+"-sess").
		SetHostID(id).Consistency(gocql.One).ScanContext(ctx, &status)
	if !errors.Is(err, gocql.ErrNotFound) {
		t.Fatalf("session on node 3 after repair: %q, %v; want it absent (sessions are not repaired)", status, err)
	}
}

// TestNoAcknowledgedQuorumWriteLostOnSIGKILL: writers keep writing at QUORUM while node 3 is
// SIGKILLed mid-burst. Every write the cluster acknowledged is read back at QUORUM after node 3
// restarts and a repair runs, and node 3 alone then holds them all too.
func TestNoAcknowledgedQuorumWriteLostOnSIGKILL(t *testing.T) {
	ctx := start(t)
	const (
		writers   = 8
		attempts  = 75  // per writer
		killAfter = 150 // acknowledged writes before the kill
	)
	var (
		mu       sync.Mutex
		acked    []cartLine
		failed   atomic.Int64
		nAcked   atomic.Int64
		killed   = make(chan struct{})
		killOnce sync.Once
		killErr  error
	)
	began := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range attempts {
				l := cartLine{user: fmt.Sprintf("burst-w%d-%d", w, i), product: "sku", quantity: int64(i%9 + 1)}
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := putCartLine(wctx, l)
				cancel()
				if err != nil {
					failed.Add(1) // not acknowledged: no promise was made
					continue
				}
				mu.Lock()
				acked = append(acked, l)
				mu.Unlock()
				if nAcked.Add(1) == killAfter {
					killOnce.Do(func() {
						go func() { killErr = cluster.KillNode(ctx, n3); close(killed) }()
					})
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-killed:
	case <-ctx.Done():
		t.Fatal("node 3 was never killed")
	}
	if killErr != nil {
		t.Fatal(killErr)
	}
	t.Logf("burst: %d acknowledged, %d failed of %d attempts in %s", len(acked), failed.Load(), writers*attempts, time.Since(began).Round(time.Second))
	if len(acked) <= killAfter {
		t.Fatalf("only %d writes acknowledged: nothing was written after the kill", len(acked))
	}

	restartNode(t, ctx, n3)
	t.Logf("node 3 back after %s", time.Since(began).Round(time.Second))
	if _, err := cluster.Repair(ctx, launcher.RepairOptions{Keyspace: keyspace, Tables: []string{"user_carts"}}); err != nil {
		t.Fatal(err)
	}
	t.Logf("repaired after %s", time.Since(began).Round(time.Second))
	// Through the repository (QUORUM), as the application reads its carts.
	var lost atomic.Int64
	forEach(t, acked, func(l cartLine) error {
		c, err := carts.ActiveCart(ctx, cart.User(l.user), time.Now())
		if err != nil || len(c.Items) != 1 || c.Items[0].ProductID != l.product || c.Items[0].Quantity != l.quantity {
			if lost.Add(1) <= 5 {
				t.Errorf("acknowledged %v: cart %+v, %v", l, c, err)
			}
		}
		return nil
	})
	if lost := lost.Load(); lost > 0 {
		t.Errorf("%d of %d acknowledged writes lost", lost, len(acked))
	}
	rows := make([]row, len(acked))
	for i, l := range acked {
		rows[i] = row{name: fmt.Sprint("cart line ", l),
			read: func(ctx context.Context, via int, cl gocql.Consistency) error { return readCartLine(ctx, via, l, cl) }}
	}
	if got := presentOn(t, ctx, n3, rows, gocql.Quorum); got != len(acked) {
		t.Errorf("QUORUM via node 3: %d of %d acknowledged writes present", got, len(acked))
	}
	if got := presentOn(t, ctx, n3, rows, gocql.One); got != len(acked) {
		t.Errorf("node 3 alone after restart and repair: %d of %d acknowledged writes", got, len(acked))
	}
}
