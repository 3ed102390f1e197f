package scaleout_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clauncher "github.com/shardmart/shardmart/internal/cassandra/launcher"
	mlauncher "github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/serverproc"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// The serve binary is built once; the clusters start once, on first use, and are shared by
// every test (each test uses its own database and keyspace).
var (
	binary   string
	buildErr error

	clusters struct {
		sync.Mutex
		stops     []func()
		mongo     *mlauncher.Set
		mongoErr  error
		cass      *clauncher.Cluster
		cassErr   error
		mongoDone bool
		cassDone  bool
	}
)

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "shardmart-scaleout-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "shardmart")
		if out, err := exec.Command("go", "build", "-o", binary, "github.com/shardmart/shardmart/cmd/shardmart").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build the shardmart binary: %v\n%s", err, out)
		}
		defer func() {
			clusters.Lock()
			defer clusters.Unlock()
			for _, stop := range clusters.stops {
				stop()
			}
		}()
		return m.Run()
	}()
	os.Exit(code)
}

// mongoSet is the shared one-member replica set.
func mongoSet(t *testing.T) *mlauncher.Set {
	t.Helper()
	clusters.Lock()
	defer clusters.Unlock()
	if !clusters.mongoDone {
		clusters.mongoDone = true
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		set, stop, err := mlauncher.StartShared(ctx, mlauncher.Options{Members: 1, BasePort: mlauncher.ScaleOutTestPort})
		clusters.mongo, clusters.mongoErr = set, err
		if err == nil {
			clusters.stops = append(clusters.stops, stop)
		}
	}
	if clusters.mongoErr != nil {
		t.Fatalf("start a MongoDB replica set on port %d: %v", mlauncher.ScaleOutTestPort, clusters.mongoErr)
	}
	return clusters.mongo
}

// cassandraNode is the shared one-node Cassandra cluster.
func cassandraNode(t *testing.T) *clauncher.Cluster {
	t.Helper()
	clusters.Lock()
	defer clusters.Unlock()
	if !clusters.cassDone {
		clusters.cassDone = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		c, stop, err := clauncher.StartShared(ctx, clauncher.Options{Nodes: 1, BaseAddr: clauncher.ScaleOutTestAddr, Name: "scaleout"})
		clusters.cass, clusters.cassErr = c, err
		if err == nil {
			clusters.stops = append(clusters.stops, stop)
		}
	}
	if clusters.cassErr != nil {
		t.Fatalf("start a Cassandra node on %s (Java 17 and Maven needed): %v", clauncher.ScaleOutTestAddr, clusters.cassErr)
	}
	return clusters.cass
}

// shopPlacement is a placement the three processes serve, with the flags locating its stores.
type shopPlacement struct {
	name string
	args []string
	// mongoURI and mongoDB locate the orders family's database, where the outbox and its
	// drain lease live.
	mongoURI, mongoDB string
	// bound is the documented staleness bound of search on this placement (docs/guides/load-balancer.md,
	// "What is shared"); tests allow it a margin for this shared, loaded machine.
	bound time.Duration
}

func mongoPlacement(t *testing.T) shopPlacement {
	set := mongoSet(t)
	db := fmt.Sprintf("scaleout_%d", time.Now().UnixNano())
	return shopPlacement{name: "mongo", bound: time.Second, mongoURI: set.URI(), mongoDB: db, args: []string{"--mongo-uri", set.URI(), "--mongo-db", db,
		"--placement", "orders=mongo,carts=mongo,sessions=mongo,events=mongo,history=mongo,catalog=mongo"}}
}

func hybridPlacement(t *testing.T) shopPlacement {
	set, node := mongoSet(t), cassandraNode(t)
	run := time.Now().UnixNano()
	ks := fmt.Sprintf("scaleout_%d", run%1_000_000_000)
	ctx := context.Background()
	if _, err := cassandrastore.ApplySchema(ctx, node.Hosts(), cassandrastore.SchemaOptions{Keyspace: ks, RF: 1}); err != nil {
		t.Fatalf("apply the Cassandra schema: %v", err)
	}
	t.Cleanup(func() {
		if st, err := cassandrastore.Open(ctx, cassandrastore.Config{Hosts: node.Hosts(), Keyspace: ks}); err == nil {
			_ = st.Session().Query("DROP KEYSPACE IF EXISTS " + ks).Exec()
			st.Close()
		}
	})
	// The catalog is a read model the projector feeds: a change shows once a projector (in any
	// process, every second) applied it, then within a tail poll.
	db := fmt.Sprintf("scaleout_%d", run)
	return shopPlacement{name: "hybrid", bound: 2 * time.Second, mongoURI: set.URI(), mongoDB: db, args: []string{"--mongo-uri", set.URI(), "--mongo-db", db,
		"--cassandra-hosts", strings.Join(node.Hosts(), ","), "--cassandra-keyspace", ks,
		"--placement", "orders=mongo,events=mongo,carts=cassandra,sessions=cassandra,history=cassandra,catalog=cassandra"}}
}

const adminToken = "scaleout-admin-token-0123456789abcdef"

// loginAccountBurst is the per-account login limit's burst the processes run with
// (--limit-login-account 10: a burst of 5, then one every 6 s).
const loginAccountPerMinute, loginAccountBurst = 10, 5

// proc is one `shardmart serve` OS process.
type proc struct {
	t      *testing.T
	name   string
	url    string
	cmd    *exec.Cmd
	logs   *serverproc.Output
	exited chan struct{}
}

var servingAddr = regexp.MustCompile(`msg=serving addr=(\S+)`)

// startProc runs serve with pl's stores and waits until it is ready; it is stopped (SIGTERM,
// then SIGKILL) when the test ends, and dies with the test binary whatever happens.
func startProc(t *testing.T, name string, pl shopPlacement) *proc {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--seed=false", "--admin-token", adminToken,
		"--data-dir", t.TempDir(), "--purge-every", "1s", "--statement-metrics=false",
		"--limit-login-client", "0", "--limit-sessions-client", "0", "--limit-register-client", "0",
		"--limit-events-session", "0", "--limit-events-client", "0",
		"--limit-login-account", fmt.Sprint(loginAccountPerMinute)}, pl.args...)
	p := &proc{t: t, name: name, cmd: exec.Command(binary, args...), logs: &serverproc.Output{}, exited: make(chan struct{})}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.logs, line)
			if m := servingAddr.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s (pid %d) log tail:\n%s", p.name, p.cmd.Process.Pid, p.logs.Tail(30))
		}
		p.stop()
	})
	select {
	case a := <-addr:
		p.url = "http://" + a
	case <-p.exited:
		t.Fatalf("%s exited at start:\n%s", name, p.logs.Tail(30))
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not listen within 2 minutes:\n%s", name, p.logs.Tail(30))
	}
	waitFor(t, time.Minute, name+" ready", func() bool {
		resp, err := http.Get(p.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// stop ends the process gracefully (SIGTERM), or by SIGKILL after 20 s.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// kill SIGKILLs the process: no shutdown, nothing flushed.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// startTrio starts three processes of one shop, one after the other.
func startTrio(t *testing.T, pl shopPlacement) []*proc {
	t.Helper()
	procs := make([]*proc, 3)
	for i := range procs {
		procs[i] = startProc(t, fmt.Sprintf("%s-%d", pl.name, i), pl)
	}
	return procs
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("waited %s for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// client speaks to the processes.
type client struct {
	t *testing.T
	h *http.Client
}

func newClient(t *testing.T) client {
	return client{t: t, h: &http.Client{Timeout: 30 * time.Second}}
}

// do sends one request to p; body is JSON (or empty), hdr name/value pairs.
func (c client) do(p *proc, method, path, token, body string, hdr ...string) (int, []byte, error) {
	req, err := http.NewRequest(method, p.url+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("X-Admin-Token", adminToken)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.h.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// must sends a request that must answer want, decoding the answer into into.
func (c client) must(p *proc, method, path, token, body string, want int, into any, hdr ...string) {
	c.t.Helper()
	st, b, err := c.do(p, method, path, token, body, hdr...)
	if err != nil {
		c.t.Fatalf("%s %s %s: %v", p.name, method, path, err)
	}
	if st != want {
		c.t.Fatalf("%s %s %s: %d %s, want %d", p.name, method, path, st, b, want)
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			c.t.Fatalf("%s %s %s: decode %s: %v", p.name, method, path, b, err)
		}
	}
}

func (c client) session(p *proc) string {
	c.t.Helper()
	var s struct{ Token string }
	c.must(p, "POST", "/v1/sessions", "", "", http.StatusCreated, &s)
	return s.Token
}

// user registers email through reg and logs in through login, returning the user's token.
func (c client) user(reg, login *proc, email string) string {
	c.t.Helper()
	guest := c.session(reg)
	creds := fmt.Sprintf(`{"email":%q,"password":"correct horse"}`, email)
	c.must(reg, "POST", "/v1/users", guest, creds, http.StatusCreated, nil)
	var out struct{ Token string }
	c.must(login, "POST", "/v1/login", guest, creds, http.StatusOK, &out)
	return out.Token
}

func (c client) product(p *proc, id, category, price string, stock int) {
	c.t.Helper()
	c.must(p, "POST", "/v1/products", "", fmt.Sprintf(`{"id":%q,"name":"Thing %s","category":%q,"price":%q,"stock":{"eu-west":%d}}`,
		id, id, category, price, stock), http.StatusCreated, nil)
}

// metric reads one unlabelled gauge from p's /metrics; ok is false when absent.
func (c client) metric(p *proc, name string) (float64, bool) {
	c.t.Helper()
	_, b, err := c.do(p, "GET", "/metrics", "", "")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v, true
			}
		}
	}
	return 0, false
}
