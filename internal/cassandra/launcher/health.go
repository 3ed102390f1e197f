package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"golang.org/x/sync/errgroup"

	"github.com/shardmart/shardmart/internal/serverproc"
)

const pollInterval = 250 * time.Millisecond

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
// (Up/Normal) in `nodetool status`. The nodes are asked at once (a nodetool run is a JVM start
// of a second or more on a loaded machine, mostly waiting); the first view that lags ends the
// round and stops the other runs.
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
		lastErr := c.convergedRound(ctx, running)
		if lastErr == nil {
			return nil
		}
		if err := serverproc.Sleep(ctx, time.Second); err != nil {
			return fmt.Errorf("cluster did not converge: %w (last: %v)", err, lastErr)
		}
	}
}

// convergedRound asks every running node for its ring view at once and returns nil when each
// sees all of them UN, else the first lag or failure seen.
func (c *Cluster) convergedRound(ctx context.Context, running []Node) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, n := range running {
		g.Go(func() error {
			out, err := c.Nodetool(ctx, n.Index, "status")
			if err != nil {
				return err
			}
			up := upNormal(out)
			for _, m := range running {
				if !up[m.Addr] {
					return fmt.Errorf("node %d does not see %s up yet", n.Index+1, m.Addr)
				}
			}
			return nil
		})
	}
	return g.Wait()
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
