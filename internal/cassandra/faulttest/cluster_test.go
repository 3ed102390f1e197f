package faulttest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

const keyspace = "shardmart"

// One 3-node cluster for the whole package: booting it is the expensive part.
var (
	cluster *launcher.Cluster
	session *gocql.Session
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	start := time.Now()
	c, stop, err := launcher.StartShared(ctx, launcher.Options{
		Nodes: 3, BaseAddr: launcher.FaultTestAddr, Name: "shardmart-faulttest", HeapMB: 384, Logger: log,
	})
	if err != nil {
		// A failure, never a skip: CI installs Java and Maven, and a developer is told how.
		fmt.Fprintf(os.Stderr, "FAIL: fault tests need a 3-node Cassandra cluster: %v\n", err)
		return 1
	}
	defer stop()
	fmt.Fprintf(os.Stderr, "faulttest: 3-node cluster up in %s, per-node boot %v\n", time.Since(start).Round(time.Second), c.BootTimes())
	cluster = c
	s, err := connect(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: connect: %v\n", err)
		return 1
	}
	defer s.Close()
	session = s
	if err := applySchema(ctx, s); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: schema: %v\n", err)
		return 1
	}
	return m.Run()
}

func connect(ctx context.Context) (*gocql.Session, error) {
	cfg := gocql.NewCluster(cluster.Hosts()...)
	cfg.Keyspace = ""
	cfg.Timeout = 15 * time.Second
	cfg.ConnectTimeout = 5 * time.Second
	// Notice restarted nodes quickly instead of after the default minute.
	cfg.ReconnectInterval = time.Second
	cfg.Logger = gocql.NewLogger(gocql.LogLevelNone)
	return cfg.CreateSession()
}

// applySchema creates the test tables: carts keyed like the store's (one row per item) and
// sessions with a TTL. speculative_retry NONE keeps a read at ONE on the one replica the
// coordinator picked (itself: GossipingPropertyFileSnitch with the dynamic snitch off), so
// "read from that node alone" really reads that node's data.
func applySchema(ctx context.Context, s *gocql.Session) error {
	for _, q := range []string{
		`CREATE KEYSPACE IF NOT EXISTS ` + keyspace + ` WITH replication = {'class': 'NetworkTopologyStrategy', 'datacenter1': 3}`,
		`CREATE TABLE IF NOT EXISTS ` + keyspace + `.carts (
			owner text, product_id text, quantity int, PRIMARY KEY ((owner), product_id))
			WITH read_repair = 'BLOCKING' AND speculative_retry = 'NONE'`,
		`CREATE TABLE IF NOT EXISTS ` + keyspace + `.sessions (
			session_id text PRIMARY KEY, user_id text, last_active timestamp)
			WITH default_time_to_live = 86400 AND speculative_retry = 'NONE'`,
	} {
		if err := s.Query(q).ExecContext(ctx); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// node indexes, 0-based; node 0 is the seed.
const (
	n1 = 0
	n2 = 1
	n3 = 2
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// allUp brings every node back, re-enables and resumes hints everywhere, and waits until the
// nodes and the driver see each other: every test starts from a healthy cluster even when the
// previous one failed half-way. Registered as a cleanup too.
func allUp(t *testing.T) {
	t.Helper()
	ctx := testCtx(t)
	heal := func() error {
		for i := range cluster.Nodes() {
			if err := cluster.StartNode(ctx, i); err != nil {
				return err
			}
		}
		if err := cluster.WaitConverged(ctx); err != nil {
			return err
		}
		for i := range cluster.Nodes() {
			if handoffChanged {
				if _, err := cluster.Nodetool(ctx, i, "enablehandoff"); err != nil {
					return err
				}
				if _, err := cluster.Nodetool(ctx, i, "resumehandoff"); err != nil {
					return err
				}
			}
			if err := waitDriverUp(ctx, i); err != nil {
				return err
			}
		}
		handoffChanged = false
		return nil
	}
	if err := heal(); err != nil {
		cluster.LogTails(t)
		t.Fatalf("restore a healthy cluster: %v", err)
	}
}

func start(t *testing.T) context.Context {
	t.Helper()
	allUp(t)
	t.Cleanup(func() {
		if t.Failed() {
			cluster.LogTails(t)
		}
	})
	return testCtx(t)
}

func addr(i int) string { return cluster.Nodes()[i].Addr }

// hostID is node i's host ID as the driver knows it, for Query.SetHostID.
func hostID(i int) (string, error) {
	ip := net.ParseIP(addr(i))
	for _, h := range session.GetHosts() {
		if h.ConnectAddress().Equal(ip) {
			return h.HostID(), nil
		}
	}
	return "", fmt.Errorf("driver does not know %s", addr(i))
}

// waitDriverUp waits until a query pinned to node i succeeds (the driver reconnected).
func waitDriverUp(ctx context.Context, i int) error {
	for {
		id, err := hostID(i)
		if err == nil {
			var key string
			err = session.Query(`SELECT key FROM system.local`).SetHostID(id).Consistency(gocql.One).ScanContext(ctx, &key)
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("driver never reached %s: %w (last: %v)", addr(i), ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// handoffChanged records that a test disabled or paused hints, so the next allUp restores them.
var handoffChanged bool

func nodetoolAll(t *testing.T, ctx context.Context, nodes []int, args ...string) {
	t.Helper()
	if strings.HasSuffix(args[0], "handoff") {
		handoffChanged = true
	}
	for _, i := range nodes {
		if _, err := cluster.Nodetool(ctx, i, args...); err != nil {
			t.Fatal(err)
		}
	}
}

func stopNode(t *testing.T, ctx context.Context, i int) {
	t.Helper()
	if err := cluster.StopNode(ctx, i); err != nil {
		t.Fatal(err)
	}
}

// restartNode starts node i and waits until the ring and the driver see it.
func restartNode(t *testing.T, ctx context.Context, i int) {
	t.Helper()
	if err := cluster.StartNode(ctx, i); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitDriverUp(ctx, i); err != nil {
		t.Fatal(err)
	}
}

// --- cart and session rows over CQL ---

type cartLine struct {
	owner, product string
	quantity       int
}

func cartLines(prefix string, n int) []cartLine {
	lines := make([]cartLine, n)
	for i := range lines {
		lines[i] = cartLine{owner: fmt.Sprintf("%s-user-%d", prefix, i), product: fmt.Sprintf("sku-%d", i%7), quantity: i%5 + 1}
	}
	return lines
}

func putCartLine(ctx context.Context, l cartLine, cl gocql.Consistency) error {
	return session.Query(`INSERT INTO `+keyspace+`.carts (owner, product_id, quantity) VALUES (?, ?, ?)`,
		l.owner, l.product, l.quantity).Consistency(cl).ExecContext(ctx)
}

func writeCart(t *testing.T, ctx context.Context, lines []cartLine, cl gocql.Consistency) {
	t.Helper()
	for _, l := range lines {
		if err := putCartLine(ctx, l, cl); err != nil {
			t.Fatalf("write %v at %v: %v", l, cl, err)
		}
	}
}

// errAbsent marks a row the coordinator did not return.
var errAbsent = errors.New("row absent")

// readCartLine reads one line with node `via` as the coordinator.
func readCartLine(ctx context.Context, via int, l cartLine, cl gocql.Consistency) error {
	id, err := hostID(via)
	if err != nil {
		return err
	}
	var q int
	err = session.Query(`SELECT quantity FROM `+keyspace+`.carts WHERE owner = ? AND product_id = ?`, l.owner, l.product).
		SetHostID(id).Consistency(cl).ScanContext(ctx, &q)
	switch {
	case errors.Is(err, gocql.ErrNotFound):
		return errAbsent
	case err != nil:
		return err
	case q != l.quantity:
		return fmt.Errorf("%v: quantity %d, want %d", l, q, l.quantity)
	}
	return nil
}

// presentOn counts the lines node i returns when it coordinates a read at cl.
func presentOn(t *testing.T, ctx context.Context, i int, lines []cartLine, cl gocql.Consistency) int {
	t.Helper()
	n := 0
	for _, l := range lines {
		switch err := readCartLine(ctx, i, l, cl); {
		case err == nil:
			n++
		case errors.Is(err, errAbsent):
		default:
			t.Fatalf("read %v on node %d at %v: %v", l, i+1, cl, err)
		}
	}
	return n
}

// eventuallyPresentOn polls until node i alone (ONE, itself the coordinator) has every line.
func eventuallyPresentOn(t *testing.T, ctx context.Context, i int, lines []cartLine, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := presentOn(t, ctx, i, lines, gocql.One)
		if got == len(lines) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d alone has %d of %d lines after %s", i+1, got, len(lines), within)
		}
		time.Sleep(time.Second)
	}
}
