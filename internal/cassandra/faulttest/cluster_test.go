package faulttest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/order"
	sessionpkg "github.com/shardmart/shardmart/internal/session"
	store "github.com/shardmart/shardmart/internal/store/cassandrastore"
)

const keyspace = store.DefaultKeyspace

// One 3-node cluster for the whole package: booting it is the expensive part. The tests write
// through the store's real repositories and check replicas with pinned CQL reads.
var (
	cluster   *launcher.Cluster
	session   *gocql.Session
	carts     cart.Repository
	sessions  sessionpkg.Repository
	histories history.Repository
	products  *store.Catalog
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
		// A node SIGKILLed and restarted replays its commit log; on a 2-core machine shared with
		// a dozen other JVMs (load average 50+) that took over the default 3 minutes.
		BootTimeout: 6 * time.Minute,
	})
	if err != nil {
		// A failure, never a skip: CI installs Java and Maven, and a developer is told how.
		fmt.Fprintf(os.Stderr, "FAIL: fault tests need a 3-node Cassandra cluster: %v\n", err)
		return 1
	}
	defer stop()
	fmt.Fprintf(os.Stderr, "faulttest: 3-node cluster up in %s, per-node boot %v\n", time.Since(start).Round(time.Second), c.BootTimes())
	cluster = c
	schemaStart := time.Now()
	if err := applySchema(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: schema: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "faulttest: schema applied in %s\n", time.Since(schemaStart).Round(100*time.Millisecond))
	// The store as the shop opens it: its driver configuration and client policy (routing,
	// speculation, retries, host health). Its session also runs the tests' pinned CQL checks.
	st, err := store.Open(ctx, store.Config{Hosts: cluster.Hosts(), Keyspace: keyspace})
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: connect: %v\n", err)
		return 1
	}
	defer st.Close()
	session = st.Session()
	carts, sessions, histories, products = st.Carts(), st.Sessions(), st.History(), st.Catalog()
	return m.Run()
}

// oneNodeTables are the tables the tests read from one node alone: cart lines, sessions,
// order-history entries and products in both catalog tables.
var oneNodeTables = []string{"user_carts", "sessions", "order_history", "products", "products_by_category"}

// applySchema applies the store's schema (`shardmart cassandra schema apply`) with RF 3, then
// sets speculative_retry NONE on oneNodeTables: a read at ONE then stays on the one replica the
// coordinator picked (itself: GossipingPropertyFileSnitch with the dynamic snitch off), so "read
// from that node alone" really reads that node's data, even when its own read takes longer than
// the store's 100 ms speculation threshold (a loaded machine, a node just restarted).
// Production keeps the default: there a speculative read is a latency win.
func applySchema(ctx context.Context) error {
	if _, err := store.ApplySchema(ctx, cluster.Hosts(), store.SchemaOptions{Keyspace: keyspace, RF: 3}); err != nil {
		return err
	}
	s, err := gocql.NewCluster(cluster.Hosts()...).CreateSession()
	if err != nil {
		return err
	}
	defer s.Close()
	for _, table := range oneNodeTables {
		if err := s.Query(`ALTER TABLE ` + keyspace + `.` + table + ` WITH speculative_retry = 'NONE'`).ExecContext(ctx); err != nil {
			return fmt.Errorf("alter %s: %w", table, err)
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

// testCtx is a test's budget: 12 minutes (a rolling restart is three restarts of a minute or
// two each at load 30, and a lagging ring view costs staleAfter and one more restart), and a
// minute less than what `go test -timeout` leaves, so a node that does not come back on a starved machine fails the test with its own
// report (runSickNode's stalls so far and ring views) rather than the binary's timeout panic,
// which prints no result. A sick-node test run alone (boot, schema, a kill and a restart of
// minutes) can take longer than go test's default 10 minutes.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	budget := 12 * time.Minute
	if deadline, ok := t.Deadline(); ok {
		budget = min(budget, time.Until(deadline)-time.Minute)
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
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
		if err := converge(t, ctx); err != nil {
			return err
		}
		for _, undo := range []string{"enablehandoff", "resumehandoff"} {
			var nodes []int
			for i := range cluster.Nodes() {
				if handoffUndo[i][undo] {
					nodes = append(nodes, i)
				}
			}
			if err := onNodes(ctx, nodes, undo); err != nil {
				return err
			}
			for _, i := range nodes {
				delete(handoffUndo[i], undo)
			}
		}
		for i := range cluster.Nodes() {
			if err := waitDriverUp(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}
	if err := heal(); err != nil {
		cluster.LogTails(t)
		t.Fatalf("restore a healthy cluster: %v", err)
	}
}

// staleAfter is how long converge waits for the ring before it restarts a node whose view
// lags behind the others': a healthy peer marks a restarted node up within seconds of its
// restart, even at load 35 (their logs' "has restarted" and "is now UP" lines).
const staleAfter = 30 * time.Second

// converge waits until every node sees every other UN, restarting a node whose gossip kept
// a restarted peer DOWN while the others saw it up (launcher.WaitConvergedRestartingStale).
func converge(t *testing.T, ctx context.Context) error {
	t.Helper()
	return cluster.WaitConvergedRestartingStale(ctx, staleAfter, t.Logf)
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
	err := eventually.Until(ctx, func() error {
		id, err := hostID(i)
		if err != nil {
			return err
		}
		var key string
		return session.Query(`SELECT key FROM system.local`).SetHostID(id).Consistency(gocql.One).ScanContext(ctx, &key)
	})
	if err != nil {
		return fmt.Errorf("driver never reached %s: %w", addr(i), err)
	}
	return nil
}

// handoffUndo holds, per node index, the nodetool commands that undo the hint changes a test
// made there (disabled or paused) and did not undo itself: the next allUp runs them. Each is a
// JVM start per node, seconds on a loaded machine, so only what a test left changed is undone.
var handoffUndo = map[int]map[string]bool{}

// undoOf pairs each hint change with the command that undoes it.
var undoOf = map[string]string{"disablehandoff": "enablehandoff", "pausehandoff": "resumehandoff"}

func nodetoolAll(t *testing.T, ctx context.Context, nodes []int, args ...string) {
	t.Helper()
	if undo, ok := undoOf[args[0]]; ok {
		for _, i := range nodes {
			if handoffUndo[i] == nil {
				handoffUndo[i] = map[string]bool{}
			}
			handoffUndo[i][undo] = true
		}
	}
	if err := onNodes(ctx, nodes, args...); err != nil {
		t.Fatal(err)
	}
	for _, i := range nodes {
		delete(handoffUndo[i], args[0]) // a change undone by the test itself
	}
}

// onNodes runs one nodetool command on the nodes at once: each run is a JVM start of a second
// or more, and the nodes take the command independently.
func onNodes(ctx context.Context, nodes []int, args ...string) error {
	var g errgroup.Group
	for _, i := range nodes {
		g.Go(func() error {
			_, err := cluster.Nodetool(ctx, i, args...)
			return err
		})
	}
	return g.Wait()
}

func stopNode(t *testing.T, ctx context.Context, i int) {
	t.Helper()
	if err := cluster.StopNode(ctx, i); err != nil {
		t.Fatal(err)
	}
}

// restartNode starts node i and waits until the ring and the driver see it. A JVM that dies
// while booting on a starved machine is not what these tests are about, so a failed start is
// logged with its diagnosis and tried once more; a second failure fails the test.
func restartNode(t *testing.T, ctx context.Context, i int) {
	t.Helper()
	if err := startNodeTwice(t, ctx, i); err != nil {
		t.Fatal(err)
	}
	if err := converge(t, ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitDriverUp(ctx, i); err != nil {
		t.Fatal(err)
	}
}

// startNodeTwice starts node i, once more if the first start fails (see restartNode).
func startNodeTwice(t *testing.T, ctx context.Context, i int) error {
	t.Helper()
	err := cluster.StartNode(ctx, i)
	if err != nil {
		t.Logf("node %d did not start, trying once more: %v", i+1, err)
		err = cluster.StartNode(ctx, i)
	}
	return err
}

// --- cart lines: written through the repository, checked per replica over CQL ---

type cartLine struct {
	user, product string
	quantity      int64
}

// row is one piece of data written through the store's repositories and looked for on a
// replica: a cart line, an order-history entry, or a product in both catalog tables.
type row struct {
	name  string
	write func(ctx context.Context) error
	// read returns errAbsent when node `via`, coordinating at cl, does not return the row.
	read func(ctx context.Context, via int, cl gocql.Consistency) error
}

// runPrefix names a test's rows for this run only: the cluster outlives a run (-count > 1),
// and a test that checks a row is missing somewhere must not find the previous run's.
func runPrefix(name string) string { return fmt.Sprintf("%s-%d", name, time.Now().UnixNano()) }

func cartLines(prefix string, n int) []row {
	rows := make([]row, n)
	for i := range rows {
		l := cartLine{user: fmt.Sprintf("%s-user-%d", prefix, i), product: fmt.Sprintf("sku-%d", i%7), quantity: int64(i%5 + 1)}
		rows[i] = row{name: fmt.Sprint("cart line ", l),
			write: func(ctx context.Context) error { return putCartLine(ctx, l) },
			read:  func(ctx context.Context, via int, cl gocql.Consistency) error { return readCartLine(ctx, via, l, cl) }}
	}
	return rows
}

// historyEntries are ORD-2/HIS-1 entries written through the history repository (QUORUM).
func historyEntries(prefix string, n int) []row {
	rows := make([]row, n)
	placed := time.Now().UTC().Truncate(time.Millisecond)
	for i := range rows {
		e := history.Entry{UserID: fmt.Sprintf("%s-buyer-%d", prefix, i), OrderID: fmt.Sprintf("%s-order-%d", prefix, i),
			PlacedAt: placed, UpdatedAt: placed, Status: order.Created, Zone: "eu", Total: money.Amount(100 * (i + 1)),
			Items: []order.Item{{ProductID: "sku-1", Category: "c", Name: "one", Quantity: 1, UnitPrice: money.Amount(100 * (i + 1))}}}
		rows[i] = row{name: "history entry " + e.OrderID,
			write: func(ctx context.Context) error { return histories.UpsertEntry(ctx, e) },
			read: func(ctx context.Context, via int, cl gocql.Consistency) error {
				return readHistoryEntry(ctx, via, e, cl)
			}}
	}
	return rows
}

// readHistoryEntry looks for the entry in its user's month bucket, node `via` coordinating at cl.
func readHistoryEntry(ctx context.Context, via int, e history.Entry, cl gocql.Consistency) error {
	return readOne(ctx, via, cl, `SELECT order_id FROM `+keyspace+`.order_history WHERE user_id = ? AND bucket = ?`,
		e.OrderID, e.UserID, e.PlacedAt.Year()*100+int(e.PlacedAt.Month()))
}

// catalogProducts are CAT-1 products written through the catalog read model (one logged
// batch over products and products_by_category); a replica has one when it has both rows.
func catalogProducts(prefix string, n int) []row {
	rows := make([]row, n)
	now := time.Now().UTC().Truncate(time.Millisecond)
	category := prefix + "-cat"
	for i := range rows {
		p := catalog.Product{ID: fmt.Sprintf("%s-prod-%d", prefix, i), Name: "product", Category: category,
			Price: money.Amount(100 + i), Stock: map[string]int64{"eu": 5}, CreatedAt: now, UpdatedAt: now}
		rows[i] = row{name: "product " + p.ID,
			write: func(ctx context.Context) error { return products.UpsertProduct(ctx, p) },
			read: func(ctx context.Context, via int, cl gocql.Consistency) error {
				if err := readOne(ctx, via, cl, `SELECT product_id FROM `+keyspace+`.products WHERE product_id = ?`, p.ID, p.ID); err != nil {
					return err
				}
				return readOne(ctx, via, cl, `SELECT product_id FROM `+keyspace+`.products_by_category WHERE category = ? AND bucket IN (0, 1, 2, 3, 4, 5, 6, 7)`,
					p.ID, category)
			}}
	}
	return rows
}

// readOne runs query with node `via` as the coordinator at cl and looks for want in its first
// column.
func readOne(ctx context.Context, via int, cl gocql.Consistency, query, want string, args ...any) error {
	id, err := hostID(via)
	if err != nil {
		return err
	}
	iter := session.Query(query, args...).SetHostID(id).Consistency(cl).IterContext(ctx)
	found := errAbsent
	var got string
	for iter.Scan(&got) {
		if got == want {
			found = nil
		}
	}
	if err := iter.Close(); err != nil {
		return err
	}
	return found
}

// putCartLine is CRT-3 through the store's cart repository (an LWT creates the cart; the line is
// a conditional batch, Paxos at SERIAL committed at QUORUM).
func putCartLine(ctx context.Context, l cartLine) error {
	_, err := carts.PutItem(ctx, cart.User(l.user), cart.Item{ProductID: l.product, Category: "c", Quantity: l.quantity},
		time.Time{}, time.Now())
	return err
}

func writeRows(t *testing.T, ctx context.Context, rows []row) {
	t.Helper()
	for _, r := range rows {
		if err := r.write(ctx); err != nil {
			t.Fatalf("write %s: %v", r.name, err)
		}
	}
}

// errAbsent marks a row the coordinator did not return.
var errAbsent = errors.New("row absent")

// readCartLine reads the user's cart partition with node `via` as the coordinator at cl and
// looks for the line.
func readCartLine(ctx context.Context, via int, l cartLine, cl gocql.Consistency) error {
	id, err := hostID(via)
	if err != nil {
		return err
	}
	iter := session.Query(`SELECT product_id, quantity FROM `+keyspace+`.user_carts WHERE user_id = ?`, l.user).
		SetHostID(id).Consistency(cl).IterContext(ctx)
	var (
		product string
		qty     int64
		found   = errAbsent
	)
	for iter.Scan(&product, &qty) {
		if product == l.product {
			found = nil
			if qty != l.quantity {
				found = fmt.Errorf("%v: quantity %d, want %d", l, qty, l.quantity)
			}
		}
	}
	if err := iter.Close(); err != nil {
		return err
	}
	return found
}

// presentOn counts the lines node i returns when it coordinates a read at cl. Eight readers
// at once: the checks, not the cluster, would otherwise dominate the run time.
func presentOn(t *testing.T, ctx context.Context, i int, rows []row, cl gocql.Consistency) int {
	t.Helper()
	var n atomic.Int64
	forEach(t, rows, func(r row) error {
		switch err := r.read(ctx, i, cl); {
		case err == nil:
			n.Add(1)
		case !errors.Is(err, errAbsent):
			return fmt.Errorf("read %s on node %d at %v: %w", r.name, i+1, cl, err)
		}
		return nil
	})
	return int(n.Load())
}

// forEach runs fn over rows with eight goroutines and fails the test on the first error.
func forEach[T any](t *testing.T, lines []T, fn func(T) error) {
	t.Helper()
	work := make(chan T)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for l := range work {
				if err := fn(l); err != nil {
					errs <- err
					for range work { // drain so the feeder finishes
					}
					return
				}
			}
		}()
	}
	for _, l := range lines {
		work <- l
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}

// eventuallyPresentOn waits until node i alone (ONE, itself the coordinator) has every line.
func eventuallyPresentOn(t *testing.T, ctx context.Context, i int, lines []row, within time.Duration) {
	t.Helper()
	eventually.NoError(t, within, func() error {
		if got := presentOn(t, ctx, i, lines, gocql.One); got != len(lines) {
			return fmt.Errorf("node %d alone has %d of %d lines", i+1, got, len(lines))
		}
		return nil
	})
}
