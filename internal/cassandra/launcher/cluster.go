package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/shardmart/shardmart/internal/serverproc"
)

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

	procs  *serverproc.Group // the nodes' JVMs, by node index
	mu     sync.Mutex
	booted map[int]time.Duration // last start-to-CQL time per node
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
	servers := make([]serverproc.Server, len(nodes))
	for i, n := range nodes {
		servers[i] = serverproc.Server{PIDFile: n.pidFile(), Marker: nodeMarker(n.Dir)}
	}
	procs := serverproc.NewGroup(servers)
	procs.UntilReaped = true
	return &Cluster{opts: opts, nodes: nodes, procs: procs, booted: map[int]time.Duration{}}, nil
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
	if err := c.checkHeld(); err != nil {
		return err
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
	return c.writeState()
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
	if p := c.procs.Started()[0]; p != nil {
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
	ctx, explain, stop = serverproc.FailOnExit(ctx, c.procs.Started(), c.exitedAt)
	defer stop()
	if err := c.WaitConverged(ctx); err != nil {
		return explain(err)
	}
	return explain(c.replicateAuth(ctx))
}

// Running reports whether node i's JVM (per its pidfile) is alive.
func (c *Cluster) Running(i int) bool {
	_, ok := c.procs.LivePID(i)
	return ok
}

// livePID returns the pid from the node's pidfile if that process is this node's JVM, so a
// recycled pid is never signalled.
func (c *Cluster) livePID(n Node) (int, bool) {
	return c.procs.LivePID(n.Index)
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
		c.procs.ForgetExited(i) // started by another process since
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
	start := time.Now()
	p, err := c.procs.Start(i, cmd, c.opts.DieWithParent, n.SystemLog(), out.Name())
	if err != nil {
		return fmt.Errorf("node %d: start java: %w", i+1, err)
	}
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

// exitedDuringStart tells whether node n's JVM is gone while it starts, and how.
func (c *Cluster) exitedDuringStart(n Node) (bool, string) { return c.procs.Exited(n.Index) }

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
	if _, err := c.node(i); err != nil {
		return err
	}
	if err := c.procs.SignalGroup(i, sig); errors.Is(err, serverproc.ErrNotRunning) {
		return fmt.Errorf("node %d is not running", i+1)
	} else if err != nil {
		return fmt.Errorf("node %d: %w", i+1, err)
	}
	return nil
}

// KillNode SIGKILLs node i's process group: a crash, no drain, no goodbye to the peers.
func (c *Cluster) KillNode(ctx context.Context, i int) error {
	return c.signalAndWait(ctx, i, syscall.SIGKILL, c.opts.StopTimeout)
}

func (c *Cluster) signalAndWait(ctx context.Context, i int, sig syscall.Signal, grace time.Duration) error {
	if _, err := c.node(i); err != nil {
		return err
	}
	if err := c.procs.Stop(ctx, i, sig, grace, c.opts.Logger.With("node", i+1), "stopping cassandra node"); err != nil {
		return fmt.Errorf("node %d: %w", i+1, err)
	}
	return nil
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
func (c *Cluster) KillAll() { c.procs.KillAll() }
