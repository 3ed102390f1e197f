package cassandracollect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// defaultCQLPort is the port assumed when a host is given without one.
const defaultCQLPort = 9042

// node is one Cassandra node and its single-host session, opened on first use.
type node struct {
	label   string // the host as given: the `node` label
	host    string
	port    int
	timeout time.Duration
	logger  *slog.Logger
	conn    cassandrastore.Connection

	mu       sync.Mutex
	session  *gocql.Session
	lastErr  error
	failedAt time.Time
}

func newNode(hostport string, timeout time.Duration, logger *slog.Logger) (*node, error) {
	host, port := hostport, defaultCQLPort
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return nil, fmt.Errorf("cassandra host %q: bad port", hostport)
		}
		host, port = h, n
	}
	if host == "" {
		return nil, fmt.Errorf("cassandra host %q: empty address", hostport)
	}
	return &node{label: hostport, host: host, port: port, timeout: timeout, logger: logger}, nil
}

// errNodeDown marks a node that could not be reached: collectors skip it (node_up says so)
// instead of failing.
var errNodeDown = errors.New("node down")

// get returns the node's session, connecting if there is none. Collectors run concurrently,
// so after a failed attempt the error is reused for the rest of this scrape window (one
// connect timeout per scrape for a dead node, not one per collector).
func (n *node) get(ctx context.Context) (*gocql.Session, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.session != nil && !n.session.Closed() {
		return n.session, nil
	}
	if n.lastErr != nil && time.Since(n.failedAt) < n.timeout {
		return nil, n.lastErr
	}
	s, err := n.connect(ctx)
	if err != nil {
		n.lastErr, n.failedAt = fmt.Errorf("%w: %s: %w", errNodeDown, n.label, err), time.Now()
		return nil, n.lastErr
	}
	n.session, n.lastErr = s, nil
	return s, nil
}

// connect opens a session that can only ever use this node: no peer discovery, and a host
// filter that admits this node's addresses only, in case the driver learns of peers from
// topology events.
func (n *node) connect(ctx context.Context) (*gocql.Session, error) {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupIPAddr(ctx, n.host)
	if err != nil {
		return nil, fmt.Errorf("resolve: %w", err)
	}
	allowed := make(map[string]bool, len(addrs))
	for _, a := range addrs {
		allowed[a.IP.String()] = true
	}
	cfg := gocql.NewCluster(n.host)
	cfg.Port = n.port
	cfg.DisableInitialHostLookup = true
	cfg.HostFilter = gocql.HostFilterFunc(func(h *gocql.HostInfo) bool {
		return allowed[h.ConnectAddress().String()]
	})
	cfg.NumConns = 1
	cfg.Timeout = n.timeout
	cfg.ConnectTimeout = n.timeout
	cfg.Consistency = gocql.One // virtual tables are node-local: consistency does not apply
	cfg.Logger = gocql.NewLogger(gocql.LogLevelNone)
	if err := n.conn.Apply(cfg); err != nil {
		return nil, err
	}
	// CreateSession takes no context; ConnectTimeout bounds it instead.
	return cfg.CreateSession()
}

// drop closes the session after a failed query, so the next scrape reconnects (or reports
// the node down) instead of reusing a dead pool.
func (n *node) drop(s *gocql.Session) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.session == s {
		n.session = nil
	}
	s.Close()
}

func (n *node) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.session != nil {
		n.session.Close()
		n.session = nil
	}
}

// isConnectionLoss tells a node that went away mid-query from a query the node refused.
func isConnectionLoss(err error) bool {
	return errors.Is(err, gocql.ErrNoConnections) || errors.Is(err, gocql.ErrConnectionClosed) ||
		errors.Is(err, gocql.ErrSessionClosed)
}

// forEachNode runs fn on every reachable node in parallel. A node that cannot be reached,
// or whose connection is lost mid-query, is skipped (node_up reports it); any other error
// fails the collector, naming the node.
func forEachNode(ctx context.Context, nodes []*node, fn func(ctx context.Context, n *node, s *gocql.Session) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			s, err := n.get(ctx)
			if err != nil {
				return
			}
			if err := fn(ctx, n, s); err != nil {
				if isConnectionLoss(err) {
					n.drop(s)
					return
				}
				errs[i] = fmt.Errorf("node %s: %w", n.label, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
