package faulttest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/serverproc"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/outbox"
	store "github.com/shardmart/shardmart/internal/store/mongostore"
)

// electionTimeout is the set's electionTimeoutMillis: 2 s instead of MongoDB's default 10 s,
// so a crash costs a few seconds of unavailability rather than ~12 s (the package's budget).
const electionTimeout = 2 * time.Second

const zone = "eu-west"

// One 3-member set for the whole package: starting it is the expensive part.
var (
	set *launcher.Set
	// checker reads what the tests assert on: primary, read concern majority, so a document it
	// sees survives any later failover. Writes (the election probe) are w: majority.
	checker *mongo.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	start := time.Now()
	s, stop, err := launcher.StartShared(ctx, launcher.Options{
		Members: 3, BasePort: launcher.FaultTestPort, ElectionTimeout: electionTimeout, Logger: log,
		// The production settings that shorten a failover (docs/mongodb.md): no catch-up round
		// (2 s here) before a new primary takes writes, and a secondary that leaves a frozen or
		// cut-off sync source about when the election ends (instead of ~6 s into the fault,
		// then reconnecting to it: the set's own stall was 10-14 s with neither).
		NoCatchUp: true, ExtraArgs: launcher.FastFailoverParameters,
	})
	if err != nil {
		// A failure, never a skip: the launcher fetches mongod itself and says what is missing.
		fmt.Fprintf(os.Stderr, "FAIL: fault tests need a 3-member replica set on port %d: %v\n", launcher.FaultTestPort, err)
		return 1
	}
	defer stop()
	fmt.Fprintf(os.Stderr, "faulttest: 3-member set up in %s (%s)\n", time.Since(start).Round(100*time.Millisecond), s.URI())
	set = s
	// The application's driver options, so the prober's view of the set's stall carries the
	// same connection behaviour as the shop's.
	c, err := mongo.Connect(store.ClientOptions(s.URI()).
		SetReadPreference(readpref.Primary()).SetReadConcern(readconcern.Majority()).
		SetWriteConcern(writeconcern.Majority()))
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: connect: %v\n", err)
		return 1
	}
	defer c.Disconnect(context.Background())
	checker = c
	return m.Run()
}

// start restores a healthy set (also as the test's cleanup, so the next test starts from one
// even when this one fails half-way) and returns the test's context, bounded in time.
func start(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	if err := restore(ctx); err != nil {
		t.Fatalf("restore a healthy set: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i := range set.Members() {
				t.Logf("member %d:\n%s", i, set.LogTail(i))
			}
		}
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		began := time.Now()
		if err := restore(rctx); err != nil {
			t.Errorf("restore a healthy set after the test: %v", err)
			return
		}
		t.Logf("set healthy again, member 0 primary, after %s", time.Since(began).Round(100*time.Millisecond))
	})
	return ctx
}

// restore starts every member that is down, waits until all are PRIMARY or SECONDARY, and then
// until member 0 (priority 2) has taken the primary back (a priority takeover once it has
// caught up and any step-down period is over), and a majority write goes through.
func restore(ctx context.Context) error {
	for i := range set.Members() {
		if err := set.StartMember(ctx, i); err != nil {
			return err
		}
	}
	if err := set.WaitHealthy(ctx); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := eventually.Until(pctx, func() error {
		if set.Primary(pctx) != 0 {
			return fmt.Errorf("member 0 did not take the primary back: %+v", set.Status(pctx))
		}
		return nil
	}); err != nil {
		return err
	}
	if err := set.WaitHealthy(ctx); err != nil {
		return err
	}
	_, err := waitWritable(ctx, "faulttest_probe")
	return err
}

// waitWritable inserts into db.probe at w: majority until one insert is acknowledged: the
// moment a primary accepts writes again, as a client sees it (discovery included).
func waitWritable(ctx context.Context, db string) (time.Duration, error) {
	began := time.Now()
	var last error
	for {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := checker.Database(db).Collection("probe").InsertOne(pctx, bson.D{{Key: "at", Value: time.Now()}})
		cancel()
		if err == nil {
			return time.Since(began), nil
		}
		last = err
		if err := serverproc.Sleep(ctx, 20*time.Millisecond); err != nil {
			return time.Since(began), fmt.Errorf("no primary accepted a majority write: %w (last: %v)", err, last)
		}
	}
}

// openStore opens the store as the application does, on a fresh database.
func openStore(t *testing.T, ctx context.Context, name string) (*store.Store, string) {
	t.Helper()
	db := fmt.Sprintf("faulttest_%s_%d", name, time.Now().UnixNano())
	s, err := store.Open(ctx, store.Options{URI: set.URI(), Database: db})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, db
}

// retry runs a setup step (not the operation under test) until it succeeds: setup racing a
// step-down is expected to fail now and then.
func retry(ctx context.Context, what string, fn func(ctx context.Context) error) error {
	var last error
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		if attempt == 50 || ctx.Err() != nil {
			return fmt.Errorf("%s: %d attempts, last: %w", what, attempt, last)
		}
		if err := serverproc.Sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("%s: %w (last: %v)", what, err, last)
		}
	}
}

// createProducts creates n products in the faulttest category, each with stock units in zone.
func createProducts(t *testing.T, ctx context.Context, s *store.Store, prefix string, n int, stock int64) []catalog.Product {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	out := make([]catalog.Product, n)
	for i := range out {
		p := catalog.Product{ID: fmt.Sprintf("%s-%d", prefix, i), Name: fmt.Sprintf("%s %d", prefix, i), Category: "faulttest",
			Price: money.Amount(100 * (i + 1)), Stock: map[string]int64{zone: stock}, CreatedAt: now, UpdatedAt: now}
		if err := retry(ctx, "create product", func(ctx context.Context) error {
			err := s.Products().CreateProduct(ctx, p)
			if errors.Is(err, catalog.ErrExists) { // an earlier attempt committed
				return nil
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		out[i] = p
	}
	return out
}

// --- raw reads (primary, majority) ---

type rawItem struct {
	ProductID string `bson:"product_id"`
	Quantity  int64  `bson:"quantity"`
}

type rawOrder struct {
	ID      string    `bson:"_id"`
	UserID  string    `bson:"user_id"`
	CartID  string    `bson:"cart_id"`
	IdemKey string    `bson:"idem_key"`
	Status  string    `bson:"status"`
	Items   []rawItem `bson:"items"`
}

type rawProduct struct {
	ID    string           `bson:"_id"`
	Stock map[string]int64 `bson:"stock"`
}

func allOrders(ctx context.Context, db string) ([]rawOrder, error) {
	cur, err := checker.Database(db).Collection("orders").Find(ctx, bson.D{})
	if err != nil {
		return nil, err
	}
	var out []rawOrder
	return out, cur.All(ctx, &out)
}

// stockOf reads every product's stock in zone.
func stockOf(ctx context.Context, db string) (map[string]int64, error) {
	cur, err := checker.Database(db).Collection("products").Find(ctx, bson.D{})
	if err != nil {
		return nil, err
	}
	var ps []rawProduct
	if err := cur.All(ctx, &ps); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(ps))
	for _, p := range ps {
		out[p.ID] = p.Stock[zone]
	}
	return out, nil
}

// outboxByKey reads the whole outbox through the store's own reader (primary, majority), every
// partition of it (outbox.Parts), and counts messages per topic and key.
func outboxByKey(ctx context.Context, s *store.Store) (map[string]map[string]int, int, error) {
	out := map[string]map[string]int{}
	total := 0
	for _, part := range outbox.Parts(s.Outbox()) {
		var after int64
		for {
			msgs, err := part.ReadOutbox(ctx, after, 1000)
			if err != nil {
				return nil, 0, err
			}
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				if out[m.Topic] == nil {
					out[m.Topic] = map[string]int{}
				}
				out[m.Topic][m.Key]++
				after = m.Seq
				total++
			}
		}
	}
	return out, total, nil
}

// --- step-downs ---

// stepDown asks the current primary to step down: {replSetStepDown: 2,
// secondaryCatchUpPeriodSecs: 1} waits up to 1 s for a caught-up secondary, which then takes
// over through an election hand-off; with force it steps down after that second whether or
// not one caught up (writes the secondaries lack would be rolled back). The old primary may
// not run again for 2 s, less than two rounds, so the next round always finds an electable
// secondary; member 0 (priority 2) takes the primary back by a priority takeover when it is not
// elected anyway. Servers before 4.2 closed every connection, so a network error counts as
// done, and so does PrimarySteppedDown (it stepped down for another reason, a priority
// takeover, while waiting for a secondary to catch up).
func stepDown(ctx context.Context, force bool) (from int, err error) {
	for attempt := 0; attempt < 20; attempt++ {
		from = set.Primary(ctx)
		if from < 0 {
			if err := serverproc.Sleep(ctx, 100*time.Millisecond); err != nil {
				return -1, err
			}
			continue
		}
		c, err := mongo.Connect(options.Client().ApplyURI(set.MemberURI(from)))
		if err != nil {
			return from, err
		}
		err = c.Database("admin").RunCommand(ctx, bson.D{
			{Key: "replSetStepDown", Value: 2}, {Key: "secondaryCatchUpPeriodSecs", Value: 1}, {Key: "force", Value: force},
		}).Err()
		_ = c.Disconnect(context.Background())
		var ce mongo.CommandError
		switch {
		case err == nil, mongo.IsNetworkError(err), errors.As(err, &ce) && ce.Code == 189:
			return from, nil
		case errors.As(err, &ce) && ce.Code == 10107: // NotWritablePrimary: it changed under us
			continue
		default:
			return from, err
		}
	}
	return from, errors.New("no primary to step down")
}

// term is the replica set's election term: its growth counts elections.
func term(ctx context.Context) int64 {
	var st struct {
		Term int64 `bson:"term"`
	}
	if err := checker.Database("admin").RunCommand(ctx, bson.D{{Key: "replSetGetStatus", Value: 1}}).Decode(&st); err != nil {
		return -1
	}
	return st.Term
}

// roundStats is what a series of step-downs did. The tries read windows while it runs.
type roundStats struct {
	stepDowns   int
	refused     []string
	writableIn  []time.Duration // step-down sent → a majority write acknowledged
	termsBefore int64
	termsAfter  int64
	moves       []string // "0→1": the member stepped down → the primary after it; "f" when forced

	mu      sync.Mutex
	windows [][2]time.Time // step-down sent → writable again
}

func (r *roundStats) String() string {
	d := slices.Clone(r.writableIn)
	slices.Sort(d)
	q := func(p float64) time.Duration {
		if len(d) == 0 {
			return 0
		}
		return d[int(p*float64(len(d)-1))].Round(10 * time.Millisecond)
	}
	return fmt.Sprintf("%d step-downs %v (%d refused), %d elections (term %d → %d), writable again after min %s / median %s / max %s",
		r.stepDowns, r.moves, len(r.refused), r.termsAfter-r.termsBefore, r.termsBefore, r.termsAfter, q(0), q(0.5), q(1))
}

// inFlight reports whether a call [begin, end] overlapped a step-down: from the command to the
// first majority write on the new primary, or the one in progress.
func (r *roundStats) inFlight(begin, end time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.windows {
		if begin.Before(w[1]) && end.After(w[0]) {
			return true
		}
	}
	return false
}

func (r *roundStats) window(i int, from, to time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i == len(r.windows) {
		r.windows = append(r.windows, [2]time.Time{})
	}
	r.windows[i] = [2]time.Time{from, to}
}

// underStepDowns runs try in workers goroutines, over and over, through rounds step-downs of
// the primary: each round waits for a writable primary, lets the workers run, steps the
// primary down while they do (forced every other round), and keeps them running through the
// election and half a second after. try gets the worker, round and try numbers and records its
// own outcome; it bounds its calls with its own contexts. At most maxTries per worker per round.
func underStepDowns(t *testing.T, ctx context.Context, db string, rounds, workers, maxTries int, st *roundStats,
	try func(ctx context.Context, w, round, i int)) {
	t.Helper()
	st.termsBefore = term(ctx)
	for r := range rounds {
		if _, err := waitWritable(ctx, db); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		var stop atomic.Bool
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < maxTries && !stop.Load() && ctx.Err() == nil; i++ {
					try(ctx, w, r, i)
				}
			}()
		}
		err := func() error {
			// Let the workers get going: the step-down lands at a different point of their
			// tries each round.
			if err := serverproc.Sleep(ctx, time.Duration(150+37*(r%7))*time.Millisecond); err != nil {
				return err
			}
			force := r%2 == 1
			at := time.Now()
			n := len(st.windows)
			st.window(n, at, at.Add(time.Hour)) // open until the set is writable again
			from, err := stepDown(ctx, force)
			if err != nil {
				st.refused = append(st.refused, fmt.Sprintf("member %d: %v", from, err))
				st.window(n, at, time.Now())
			} else {
				st.stepDowns++
				if _, err := waitWritable(ctx, db); err != nil {
					return err
				}
				st.window(n, at, time.Now())
				st.writableIn = append(st.writableIn, time.Since(at))
				st.moves = append(st.moves, fmt.Sprintf("%d→%d%s", from, set.Primary(ctx), map[bool]string{true: "f"}[force]))
			}
			// Keep the workers running a moment on the new primary.
			return serverproc.Sleep(ctx, 500*time.Millisecond)
		}()
		stop.Store(true)
		wg.Wait()
		if err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
	}
	st.termsAfter = term(ctx)
	if len(st.refused) > 0 {
		t.Logf("step-downs refused: %s", strings.Join(st.refused, "; "))
	}
}

// errKind is a short name for an error, for the logs: server error names and labels, or the
// driver's kind, or the message's start.
func errKind(err error) string {
	var ce mongo.CommandError
	var we mongo.WriteException
	switch {
	case err == nil:
		return "none"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.As(err, &ce) && ce.Name != "":
		return fmt.Sprintf("%s %v", ce.Name, ce.Labels)
	case errors.As(err, &we) && we.WriteConcernError != nil:
		return fmt.Sprintf("write concern %s %v", we.WriteConcernError.Name, we.Labels)
	case mongo.IsNetworkError(err):
		return "network error"
	case mongo.IsTimeout(err):
		return "timeout"
	}
	msg := err.Error()
	if len(msg) > 90 {
		msg = msg[:90] + "…"
	}
	return msg
}

// counter counts errors by kind for the logs, keeping the first full message of each kind.
// tally counts the outcomes of the calls a step-down test makes and keeps its failures; the
// workers update it concurrently.
type tally struct {
	tried, applied, cleanFail, retriedOK, inFlight, slow atomic.Int64
	errKinds                                             counter
	mu                                                   sync.Mutex
	bad                                                  []string
}

func (tl *tally) fail(format string, args ...any) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.bad = append(tl.bad, fmt.Sprintf(format, args...))
}

// check fails t on each failure kept (the first ten), on fewer step-downs than half the rounds,
// and when no call was in flight at a step-down (the test then proved nothing); what names one
// call in that message.
func (tl *tally) check(t *testing.T, stats *roundStats, rounds int, what string) {
	t.Helper()
	if tl.cleanFail.Load() > 0 {
		t.Logf("one error of each kind:%s", tl.errKinds.examples())
	}
	for i, b := range tl.bad {
		if i == 10 {
			t.Errorf("… and %d more", len(tl.bad)-10)
			break
		}
		t.Error(b)
	}
	if stats.stepDowns < rounds/2 {
		t.Errorf("only %d of %d step-downs happened", stats.stepDowns, rounds)
	}
	if tl.inFlight.Load() == 0 {
		t.Errorf("no %s was in flight at a step-down: the test proved nothing", what)
	}
}

type counter struct {
	mu      sync.Mutex
	m       map[string]int
	example map[string]string
}

func (c *counter) add(err error) {
	k := errKind(err)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m, c.example = map[string]int{}, map[string]string{}
	}
	if c.m[k]++; c.m[k] == 1 {
		c.example[k] = err.Error()
	}
}

// examples is one full message per kind.
func (c *counter) examples() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(c.example)) {
		fmt.Fprintf(&b, "\n\t%s: %s", k, c.example[k])
	}
	return b.String()
}

func (c *counter) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(c.m))
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%d× %s", c.m[k], k)
	}
	return b.String()
}

// budget is the time a caller gives the operation under test: every other try has 1 s, as a
// request with a short deadline, so some calls end in an error during an election instead of
// riding it out in the driver's retries; the others have 30 s.
func budget(try int) time.Duration {
	if try%2 == 1 {
		return time.Second
	}
	return 30 * time.Second
}
