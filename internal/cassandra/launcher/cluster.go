package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/serverproc"
)

const pollInterval = 250 * time.Millisecond

// Options describe a local cluster. Zero values take the defaults noted.
type Options struct {
	Nodes    int    // 1..9, default 1
	Dir      string // cluster directory (configs, data, logs, pidfiles); required
	BaseAddr string // first node's address, default 127.0.0.1; node i gets BaseAddr+i
	Name     string // cluster_name, default "shardmart"
	HeapMB   int    // per node, default 384
	Version  string // Cassandra version, default DefaultVersion
	CacheDir string // jar cache, default DefaultCacheDir()
	// DieWithParent asks the kernel to SIGKILL each JVM when the starting process dies
	// (PR_SET_PDEATHSIG), so a crashed or killed `go test` leaves no JVM behind. Off for
	// `shardmart cassandra up`, whose nodes outlive the command.
	DieWithParent bool
	// DCNodes, when set, spreads the nodes over data centres dc1, dc2, ... (DCNodes[i] nodes in
	// DC i+1, GossipingPropertyFileSnitch) and Nodes is their sum. Without it every node is in
	// datacenter1.
	DCNodes []int
	// Auth turns on PasswordAuthenticator, CassandraAuthorizer and CassandraRoleManager. The
	// superuser is Cassandra's default (SuperUser); with several DCs, Up replicates system_auth
	// to every DC so each DC logs its users in on its own.
	Auth bool
	// TLS turns on client encryption (CQL over TLS only, internode traffic stays plain). The
	// launcher makes a CA and the certificates (TLSFiles) unless UserTLS names the user's own
	// PEM keystore and CA.
	TLS     bool
	UserTLS *TLSFiles
	// RequireClientCert makes the nodes require a client certificate signed by the CA (mTLS).
	RequireClientCert bool
	// PaxosVariant is cassandra.yaml's paxos_variant ("v1" or "v2"); empty leaves Cassandra's
	// default (v1 in 5.0).
	PaxosVariant string
	// C1Only stops the JIT at its first tier (-XX:TieredStopAtLevel=1). In a 4-minute
	// robustness run on 2 cores the nodes spent 40% of their CPU in the C2 compiler, which
	// pays off only over a long run; the same bytecode runs, only slower once warm. For short
	// test clusters on small machines, never for benchmarks.
	C1Only      bool
	BootTimeout time.Duration // per node, default 3 minutes
	StopTimeout time.Duration // SIGTERM grace before SIGKILL, default 45 s
	Logger      *slog.Logger  // default slog.Default()
}

func (o *Options) defaults() error {
	if o.Dir == "" {
		return errors.New("launcher: Options.Dir is required")
	}
	if o.PaxosVariant != "" && o.PaxosVariant != "v1" && o.PaxosVariant != "v2" {
		return fmt.Errorf("launcher: paxos variant %q: want v1 or v2", o.PaxosVariant)
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("launcher: %w", err)
	}
	o.Dir = abs
	if len(o.DCNodes) > 0 {
		if len(o.DCNodes) > 4 {
			return fmt.Errorf("launcher: %d data centres: want at most 4", len(o.DCNodes))
		}
		sum := 0
		for i, n := range o.DCNodes {
			if n < 1 {
				return fmt.Errorf("launcher: data centre dc%d has %d nodes: want at least 1", i+1, n)
			}
			sum += n
		}
		if o.Nodes != 0 && o.Nodes != sum {
			return fmt.Errorf("launcher: %d nodes but data centres of %v", o.Nodes, o.DCNodes)
		}
		o.Nodes = sum
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.UserTLS != nil {
		o.TLS = true
		if o.UserTLS.Keystore == "" || o.UserTLS.CA == "" {
			return errors.New("launcher: TLS with your own files needs a PEM keystore (key and certificate chain) and the CA")
		}
	}
	if o.RequireClientCert && !o.TLS {
		return errors.New("launcher: a required client certificate needs TLS")
	}
	if o.RequireClientCert && o.UserTLS != nil && o.UserTLS.ClientCert == "" {
		// The launcher's readiness checks would be refused by the nodes until the boot timeout.
		return errors.New("launcher: --require-client-cert with your own --tls-keystore/--tls-ca needs a client certificate for the launcher; use the generated files (--tls alone)")
	}
	if o.Nodes < 1 || o.Nodes > 9 {
		return fmt.Errorf("launcher: %d nodes: want 1 to 9", o.Nodes)
	}
	if o.BaseAddr == "" {
		o.BaseAddr = "127.0.0.1"
	}
	if o.Name == "" {
		o.Name = "shardmart"
	}
	if o.HeapMB == 0 {
		o.HeapMB = 384
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir()
	}
	if o.BootTimeout == 0 {
		o.BootTimeout = 3 * time.Minute
	}
	if o.StopTimeout == 0 {
		o.StopTimeout = 45 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Cluster is a local Cassandra cluster. Its methods may be called from several goroutines.
type Cluster struct {
	opts  Options
	nodes []Node
	lib   string    // jar directory, set by prepare
	jamm  string    // the jamm agent jar in lib (Cassandra measures memtables with it)
	tls   *TLSFiles // the files in use when TLS is on, set by prepare

	cp  string      // jarClasspath(lib), set by prepare
	cds cdsArchives // class-data sharing archives in use, set by prepare
	// classList, during the class-data sharing training run only, is where the JVMs list
	// the classes they load.
	classList string

	mu      sync.Mutex
	procs   map[int]*serverproc.Child // JVMs this process started
	booted  map[int]time.Duration     // last start-to-CQL time per node
	logFrom map[int]logOffsets        // where each node's last start began writing its logs
}

// New validates opts and lays out the nodes; nothing starts.
func New(opts Options) (*Cluster, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	dcs := opts.DCNodes
	if len(dcs) == 0 {
		dcs = []int{opts.Nodes}
	}
	nodes, err := layout(opts.Dir, opts.BaseAddr, dcs)
	if err != nil {
		return nil, err
	}
	return &Cluster{opts: opts, nodes: nodes, procs: map[int]*serverproc.Child{}, booted: map[int]time.Duration{}, logFrom: map[int]logOffsets{}}, nil
}

// stateFile remembers the topology so `down`, `status` and `repair` work from another process.
func stateFile(dir string) string { return filepath.Join(dir, "cluster.json") }

type state struct {
	Nodes    int    `json:"nodes"`
	BaseAddr string `json:"base_addr"`
	Name     string `json:"name"`
	HeapMB   int    `json:"heap_mb"`
	Version  string `json:"version"`
	CacheDir string `json:"cache_dir"`
	DCNodes  []int  `json:"dc_nodes,omitempty"`
	Auth     bool   `json:"auth,omitempty"`
	TLS      bool   `json:"tls,omitempty"`
	// UserTLS: the user's own files (absent: the launcher's, under tls/).
	UserTLS           *TLSFiles `json:"user_tls,omitempty"`
	RequireClientCert bool      `json:"require_client_cert,omitempty"`
}

// ErrNoCluster means the directory holds no cluster written by Up.
var ErrNoCluster = errors.New("no cluster in directory (run `shardmart cassandra up` first)")

// ErrOtherTopology means the directory holds a cluster of another size, on other addresses or
// with other login/TLS settings: its nodes keep the ring they had, so nothing starts.
var ErrOtherTopology = errors.New("the directory holds another cluster's data")

// readState reads the state file Up wrote into dir.
func readState(dir string) (state, error) {
	var s state
	b, err := os.ReadFile(stateFile(dir))
	if errors.Is(err, os.ErrNotExist) {
		return s, fmt.Errorf("%s: %w", dir, ErrNoCluster)
	}
	if err != nil {
		return s, fmt.Errorf("open cluster: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("open cluster %s: %w", stateFile(dir), err)
	}
	return s, nil
}

// Open loads the cluster that Up wrote into dir.
func Open(dir string, logger *slog.Logger) (*Cluster, error) {
	s, err := readState(dir)
	if err != nil {
		return nil, err
	}
	return New(Options{Dir: dir, Nodes: s.Nodes, BaseAddr: s.BaseAddr, Name: s.Name, HeapMB: s.HeapMB,
		Version: s.Version, CacheDir: s.CacheDir, Logger: logger, DCNodes: s.DCNodes, Auth: s.Auth, TLS: s.TLS,
		UserTLS: s.UserTLS, RequireClientCert: s.RequireClientCert})
}

// Nodes returns the cluster's nodes, seed first.
func (c *Cluster) Nodes() []Node { return append([]Node(nil), c.nodes...) }

// Hosts returns the CQL contact points (port CQLPort).
func (c *Cluster) Hosts() []string {
	h := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		h[i] = n.Addr
	}
	return h
}

// Dir is the cluster directory.
func (c *Cluster) Dir() string { return c.opts.Dir }

// BootTimes reports, per node index, how long its last start took until CQL answered.
func (c *Cluster) BootTimes() map[int]time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[int]time.Duration, len(c.booted))
	for k, v := range c.booted {
		m[k] = v
	}
	return m
}

func (c *Cluster) node(i int) (Node, error) {
	if i < 0 || i >= len(c.nodes) {
		return Node{}, fmt.Errorf("node index %d: cluster has %d nodes", i, len(c.nodes))
	}
	return c.nodes[i], nil
}

// prepare checks Java, fetches the jars and writes the state file.
func (c *Cluster) prepare(ctx context.Context) error {
	if c.lib != "" {
		return nil
	}
	// Each node keeps the tokens and peers it first started with, whatever the new layout says:
	// a 3-node cluster's node started alone owns a third of the ring and waits for the others.
	held, err := readState(c.opts.Dir)
	switch {
	case errors.Is(err, ErrNoCluster):
	case err != nil:
		return err
	case held.Nodes != c.opts.Nodes || held.BaseAddr != c.opts.BaseAddr || !slices.Equal(held.DCNodes, c.opts.DCNodes):
		return fmt.Errorf("%w: %s holds a %d-node cluster from %s; asked for %d node(s) from %s (stop it with `shardmart cassandra down`, then move it away, or choose another --cassandra-dir)",
			ErrOtherTopology, c.opts.Dir, held.Nodes, held.BaseAddr, c.opts.Nodes, c.opts.BaseAddr)
	case held.Auth != c.opts.Auth || held.TLS != c.opts.TLS || held.RequireClientCert != c.opts.RequireClientCert:
		// Starting without login or TLS would rewrite the state and open the data to anyone.
		return fmt.Errorf("%w: %s holds a cluster with %s; asked for %s (give the same flags, or stop it with `shardmart cassandra down` and choose another --cassandra-dir)",
			ErrOtherTopology, c.opts.Dir, securityFlags(held.Auth, held.TLS, held.RequireClientCert), securityFlags(c.opts.Auth, c.opts.TLS, c.opts.RequireClientCert))
	}
	if err := CheckPrerequisites(ctx); err != nil {
		return err
	}
	lib, err := EnsureJars(ctx, c.opts.CacheDir, c.opts.Version)
	if err != nil {
		return err
	}
	jamm, _ := filepath.Glob(filepath.Join(lib, "jamm-*.jar"))
	if len(jamm) != 1 {
		return fmt.Errorf("jar cache %s: want one jamm-*.jar, found %v (delete the directory to fetch again)", lib, jamm)
	}
	cp, err := jarClasspath(lib)
	if err != nil {
		return err
	}
	c.cds = c.useCDS(ctx)
	c.lib, c.jamm, c.cp = lib, jamm[0], cp
	if err := os.MkdirAll(c.opts.Dir, 0o755); err != nil {
		return fmt.Errorf("cluster dir: %w", err)
	}
	if c.opts.TLS {
		f := c.opts.UserTLS
		if f == nil {
			g, err := generatedTLS(c.opts.Dir, c.nodes)
			if err != nil {
				return err
			}
			f = &g
		}
		c.tls = f
	}
	b, _ := json.MarshalIndent(state{Nodes: c.opts.Nodes, BaseAddr: c.opts.BaseAddr, Name: c.opts.Name,
		HeapMB: c.opts.HeapMB, Version: c.opts.Version, CacheDir: c.opts.CacheDir, DCNodes: c.opts.DCNodes,
		Auth: c.opts.Auth, TLS: c.opts.TLS, UserTLS: c.opts.UserTLS, RequireClientCert: c.opts.RequireClientCert}, "", "  ")
	if err := os.WriteFile(stateFile(c.opts.Dir), b, 0o644); err != nil {
		return fmt.Errorf("cluster dir: %w", err)
	}
	return nil
}

// securityFlags names the `cassandra up` flags of a login/TLS setting.
func securityFlags(auth, tls, clientCert bool) string {
	var f []string
	if auth {
		f = append(f, "--auth")
	}
	if tls {
		f = append(f, "--tls")
	}
	if clientCert {
		f = append(f, "--require-client-cert")
	}
	if len(f) == 0 {
		return "no --auth/--tls"
	}
	return strings.Join(f, " ")
}

// Up starts every node that is not running (the seed first, then the others together),
// waits until each answers CQL, and until every node sees all others UP.
func (c *Cluster) Up(ctx context.Context) error {
	if err := c.prepare(ctx); err != nil {
		return err
	}
	if err := c.StartNode(ctx, 0); err != nil {
		return err
	}
	// From here a node that dies (the seed while the others join, any node while the ring
	// settles) fails Up at once, with its ERROR lines, instead of leaving the others' waits to
	// their timeouts.
	// The seed alone: the others' entries may be JVMs of an earlier start, exited since.
	seed := map[int]*serverproc.Child{}
	if p := c.started()[0]; p != nil {
		seed[0] = p
	}
	seedCtx, explain, stop := serverproc.FailOnExit(ctx, seed, c.exitedAt)
	defer stop()
	startCtx, fail := context.WithCancelCause(seedCtx)
	defer fail(nil)
	errs := make(chan error, len(c.nodes))
	for i := 1; i < len(c.nodes); i++ {
		go func() {
			err := c.StartNode(startCtx, i)
			if err != nil {
				fail(err)
			}
			errs <- err
		}()
	}
	var all []error
	for i := 1; i < len(c.nodes); i++ {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	if len(all) > 0 {
		if seedCtx.Err() == nil { // a node failed first; the others' errors are its echo
			return context.Cause(startCtx)
		}
		return explain(errors.Join(all...))
	}
	ctx, explain, stop = serverproc.FailOnExit(ctx, c.started(), c.exitedAt)
	defer stop()
	if err := c.WaitConverged(ctx); err != nil {
		return explain(err)
	}
	return explain(c.replicateAuth(ctx))
}

// Running reports whether node i's JVM (per its pidfile) is alive.
func (c *Cluster) Running(i int) bool {
	n, err := c.node(i)
	if err != nil {
		return false
	}
	_, ok := c.livePID(n)
	return ok
}

// livePID returns the pid from the node's pidfile if that process is this node's JVM, so a
// recycled pid is never signalled.
func (c *Cluster) livePID(n Node) (int, bool) {
	return serverproc.ReadPID(n.pidFile(), nodeMarker(n.Dir))
}

// StartNode starts node i if it is not running and waits until it answers CQL.
func (c *Cluster) StartNode(ctx context.Context, i int) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	if err := c.prepare(ctx); err != nil {
		return err
	}
	log := c.opts.Logger.With("node", i+1, "addr", n.Addr)
	if _, ok := c.livePID(n); ok {
		c.forgetExited(i) // started by another process since
		log.Info("cassandra node already running")
		return c.waitCQL(ctx, n)
	}
	for _, port := range []int{CQLPort, StoragePort, n.JMXPort} {
		host := n.Addr
		if port == n.JMXPort {
			host = "127.0.0.1"
		}
		if conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), 200*time.Millisecond); err == nil {
			_ = conn.Close()
			return fmt.Errorf("node %d: %s:%d is already in use by another process (another cluster on this address? choose another base address or stop it)", i+1, host, port)
		}
	}
	restart := n.HasData()
	if err := writeNodeConfig(c, n); err != nil {
		return err
	}
	out, err := os.OpenFile(filepath.Join(n.LogDir(), "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("node %d: %w", i+1, err)
	}
	defer out.Close() // the child holds its own descriptor
	cmd := exec.Command("java", serverArgs(c, n)...)
	cmd.Dir = n.Dir
	cmd.Stdout, cmd.Stderr = out, out
	if n.GID != 0 {
		// Same user, the node's own group and no supplementary groups: iptables can then match
		// this node's outbound packets by group.
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: uint32(os.Getuid()), Gid: uint32(n.GID), Groups: []uint32{}}}
	}
	from := logOffsets{system: serverproc.LogSize(n.SystemLog()), stdout: serverproc.LogSize(out.Name())}
	start := time.Now()
	p, err := serverproc.Start(cmd, n.pidFile(), c.opts.DieWithParent)
	if err != nil {
		return fmt.Errorf("node %d: start java: %w", i+1, err)
	}
	c.mu.Lock()
	c.procs[i], c.logFrom[i] = p, from
	c.mu.Unlock()
	log.Info("cassandra node starting", "pid", p.PID, "jmx_port", n.JMXPort, "restart", restart)
	if restart {
		if err := c.openWhenPeersUp(ctx, n); err != nil {
			return err
		}
	}
	if err := c.waitCQL(ctx, n); err != nil {
		return err
	}
	took := time.Since(start)
	c.mu.Lock()
	c.booted[i] = took
	c.mu.Unlock()
	log.Info("cassandra node answers CQL", "boot", took.Round(100*time.Millisecond))
	return nil
}

// exitedDuringStart tells whether node n's JVM is gone. For a JVM this process started, the
// child's own exit is the truth (and its status says how); the pidfile is only consulted for
// a node started by another process.
func (c *Cluster) exitedDuringStart(n Node) (bool, string) {
	c.mu.Lock()
	p := c.procs[n.Index]
	c.mu.Unlock()
	if p != nil {
		return p.Exited()
	}
	if _, ok := c.livePID(n); !ok {
		return true, "no live process in its pidfile"
	}
	return false, ""
}

// waitCQL polls until node n answers a CQL query, failing early if its JVM exits.
func (c *Cluster) waitCQL(ctx context.Context, n Node) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.BootTimeout)
	defer cancel()
	for {
		if exited, how := c.exitedDuringStart(n); exited {
			return c.exitError(n, how)
		}
		if err := c.pingCQL(ctx, n.Addr); err == nil {
			return nil
		}
		if err := serverproc.Sleep(ctx, pollInterval); err != nil {
			return fmt.Errorf("node %d: CQL did not answer within %s: %w; log: %s", n.Index+1, c.opts.BootTimeout, err, n.SystemLog())
		}
	}
}

// pingCQL opens a one-host session (no ring discovery) and reads system.local.
func (c *Cluster) pingCQL(ctx context.Context, addr string) error {
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(CQLPort)), time.Second); err != nil {
		return err
	} else {
		_ = conn.Close()
	}
	s, err := c.singleHostSession(addr)
	if err != nil {
		return err
	}
	defer s.Close()
	var v string
	return s.Query("SELECT release_version FROM system.local").ScanContext(ctx, &v)
}

// singleHostSession talks to addr only: no ring discovery, no driver log noise; as the
// superuser over TLS when the cluster wants them.
func (c *Cluster) singleHostSession(addr string) (*gocql.Session, error) {
	cfg := gocql.NewCluster(addr)
	cfg.DisableInitialHostLookup = true
	cfg.Timeout = 10 * time.Second
	cfg.ConnectTimeout = 2 * time.Second
	cfg.NumConns = 1
	cfg.Logger = gocql.NewLogger(gocql.LogLevelNone)
	if err := c.secure(cfg); err != nil {
		return nil, err
	}
	return cfg.CreateSession()
}

// WaitConverged waits until every running node reports every other running node UN
// (Up/Normal) in `nodetool status`.
func (c *Cluster) WaitConverged(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.BootTimeout)
	defer cancel()
	for {
		var running []Node
		for _, n := range c.nodes {
			if _, ok := c.livePID(n); ok {
				running = append(running, n)
			}
		}
		if len(running) == 0 {
			return errors.New("no node is running")
		}
		converged := true
		var lastErr error
		for _, n := range running {
			out, err := c.Nodetool(ctx, n.Index, "status")
			if err != nil {
				converged, lastErr = false, err
				break
			}
			up := upNormal(out)
			for _, m := range running {
				if !up[m.Addr] {
					converged = false
					lastErr = fmt.Errorf("node %d does not see %s up yet", n.Index+1, m.Addr)
				}
			}
			if !converged {
				break
			}
		}
		if converged {
			return nil
		}
		if err := serverproc.Sleep(ctx, time.Second); err != nil {
			return fmt.Errorf("cluster did not converge: %w (last: %v)", err, lastErr)
		}
	}
}

// upNormal parses `nodetool status` into the set of addresses marked UN.
func upNormal(status string) map[string]bool {
	up := map[string]bool{}
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "UN" {
			up[f[1]] = true
		}
	}
	return up
}

// StopNode drains node i cleanly: SIGTERM to its process group (Cassandra's shutdown hook
// announces the shutdown to its peers), SIGKILL after StopTimeout. A stopped node is no error.
func (c *Cluster) StopNode(ctx context.Context, i int) error {
	return c.signalAndWait(ctx, i, syscall.SIGTERM, c.opts.StopTimeout)
}

// PauseNode freezes node i's process group with SIGSTOP (what a long GC pause or a stuck disk
// looks like to its peers and clients); ResumeNode thaws it. Pausing a stopped node is an error.
func (c *Cluster) PauseNode(i int) error { return c.signal(i, syscall.SIGSTOP) }

// ResumeNode sends SIGCONT to node i's process group.
func (c *Cluster) ResumeNode(i int) error { return c.signal(i, syscall.SIGCONT) }

func (c *Cluster) signal(i int, sig syscall.Signal) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	pid, ok := c.livePID(n)
	if !ok {
		return fmt.Errorf("node %d is not running", i+1)
	}
	if err := syscall.Kill(-pid, sig); err != nil {
		return fmt.Errorf("node %d: %s: %w", i+1, sig, err)
	}
	return nil
}

// KillNode SIGKILLs node i's process group: a crash, no drain, no goodbye to the peers.
func (c *Cluster) KillNode(ctx context.Context, i int) error {
	return c.signalAndWait(ctx, i, syscall.SIGKILL, c.opts.StopTimeout)
}

func (c *Cluster) signalAndWait(ctx context.Context, i int, sig syscall.Signal, grace time.Duration) error {
	n, err := c.node(i)
	if err != nil {
		return err
	}
	pid, ok := c.livePID(n)
	if !ok {
		return nil
	}
	c.opts.Logger.Info("stopping cassandra node", "node", i+1, "pid", pid, "signal", sig.String())
	if err := serverproc.SignalAndWait(ctx, pid, sig, grace, func() bool { return c.alive(i, n) }, c.opts.Logger.With("node", i+1)); err != nil {
		return fmt.Errorf("node %d: %w", i+1, err)
	}
	_ = os.Remove(n.pidFile())
	return nil
}

// alive reports whether node n still runs. A child of ours counts as alive until it is reaped:
// a SIGKILLed JVM's main thread shows as a zombie while its other threads still exit and hold
// its sockets, so a restart at once would find its ports still in use.
func (c *Cluster) alive(i int, n Node) bool {
	c.mu.Lock()
	p := c.procs[i]
	c.mu.Unlock()
	if p != nil {
		if gone, _ := p.Exited(); !gone {
			return true
		}
	}
	_, ok := c.livePID(n)
	return ok
}

// Down stops every node (in parallel, SIGTERM then SIGKILL).
func (c *Cluster) Down(ctx context.Context) error {
	errs := make(chan error, len(c.nodes))
	for i := range c.nodes {
		go func() { errs <- c.StopNode(ctx, i) }()
	}
	var all []error
	for range c.nodes {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// KillAll SIGKILLs every node without waiting for a drain; for emergency cleanup.
func (c *Cluster) KillAll() {
	for i, n := range c.nodes {
		if pid, ok := c.livePID(n); ok {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		c.mu.Lock()
		p := c.procs[i]
		c.mu.Unlock()
		if p != nil {
			p.Kill()
		}
		_ = os.Remove(n.pidFile())
	}
}

// logOffsets are the sizes of a node's logs when it was last started.
type logOffsets struct{ system, stdout int64 }

// started are the JVMs this process started, by node.
func (c *Cluster) started() map[int]*serverproc.Child {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.procs)
}

// forgetExited drops node i's JVM of an earlier start once it has exited.
func (c *Cluster) forgetExited(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[i]; p != nil {
		if gone, _ := p.Exited(); gone {
			delete(c.procs, i)
		}
	}
}

// exitedAt is the error of node i's JVM p exiting, for FailOnExit.
func (c *Cluster) exitedAt(i int, p *serverproc.Child) error {
	_, how := p.Exited()
	return c.exitError(c.nodes[i], how)
}

// exitError says that node n died while starting, how, and why in its own words: the ERROR
// lines its start logged (the cause is often well above the shutdown chatter at the end).
func (c *Cluster) exitError(n Node, how string) error {
	c.mu.Lock()
	from := c.logFrom[n.Index]
	c.mu.Unlock()
	var picked []string
	inError := false
	for _, l := range serverproc.LogLinesSince(n.SystemLog(), from.system) {
		switch {
		case errorLine(l):
			picked, inError = append(picked, l), true
		case logEntry(l):
			inError = false
		case inError && !strings.HasPrefix(strings.TrimSpace(l), "at ") && !strings.HasPrefix(strings.TrimSpace(l), "..."):
			// The exception the ERROR entry carries ("…Exception: Saved cluster name a !=
			// configured name b", "Caused by: …"): the cause itself. Its stack frames are not.
			picked = append(picked, "  "+strings.TrimSpace(l))
		}
	}
	for _, l := range serverproc.LogLinesSince(filepath.Join(n.LogDir(), "stdout.log"), from.stdout) {
		if errorLine(l) && !slices.Contains(picked, l) { // stdout repeats system.log's lines
			picked = append(picked, l)
		}
	}
	if len(picked) == 0 { // killed, say: what it was doing
		picked = serverproc.LogLinesSince(n.SystemLog(), from.system)
	}
	if len(picked) > 12 {
		picked = picked[len(picked)-12:]
	}
	return fmt.Errorf("%w: node %d (%s), while starting (%s):\n  %s", serverproc.ErrExited, n.Index+1, n.Addr, how,
		strings.Join(append(picked, "(log: "+n.SystemLog()+")"), "\n  "))
}

// logEntry tells a line that starts a system.log entry ("INFO  [main] 2026-…").
func logEntry(l string) bool {
	for _, level := range []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"} {
		if strings.HasPrefix(l, level+" ") {
			return true
		}
	}
	return false
}

// errorLine tells a line that says why Cassandra or its JVM stopped.
func errorLine(l string) bool {
	return strings.Contains(l, "ERROR") || strings.Contains(l, "Exception encountered") || strings.HasPrefix(l, "Error:")
}

// tailErrors returns the last lines of the node's logs, for startup failures.
func tailErrors(n Node) string {
	var b strings.Builder
	for _, f := range []string{n.SystemLog(), filepath.Join(n.LogDir(), "stdout.log")} {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		// The cause is an ERROR line, often well above the shutdown chatter at the end.
		var errs []string
		for _, l := range lines {
			if errorLine(l) {
				errs = append(errs, l)
			}
		}
		if len(errs) > 10 {
			errs = errs[len(errs)-10:]
		}
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		fmt.Fprintf(&b, "== %s (errors)\n%s\n== %s (last lines)\n%s\n", f, strings.Join(errs, "\n"), f, strings.Join(lines, "\n"))
	}
	return b.String()
}
