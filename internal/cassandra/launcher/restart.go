package launcher

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// A node that has data starts as a production node restarts: no gossip-settle or ring-delay
// shortcut (serverArgs), and its native port closed (start_native_transport: false) until it
// sees every other running node up and normal in its own view, when the launcher opens it
// (nodetool enablebinary). Cassandra's own start-up check waits only until at most one peer
// of the local DC is down, so a node restarted while another is still rejoining could take
// clients before it knew the third node was up; a second fault then left it coordinating with
// a peer it thought was down, and requests through it failed.

// peersWait bounds how long a restarted node waits for its peers before it opens its native
// port anyway (as Cassandra's block_for_peers_timeout does): a peer that is running but never
// comes up (frozen) must not keep the node from serving.
const peersWait = 2 * time.Minute

// openWhenPeersUp waits until node n sees every other running node UN, then enables its
// native transport. It returns when the port has been asked to open; waitCQL follows.
func (c *Cluster) openWhenPeersUp(ctx context.Context, n Node) error {
	log := c.opts.Logger.With("node", n.Index+1, "addr", n.Addr)
	wait, cancel := context.WithTimeout(ctx, min(peersWait, c.opts.BootTimeout))
	defer cancel()
	var missing []string
	for {
		if exited, how := c.exitedDuringStart(n); exited {
			return c.exitError(n, how)
		}
		out, err := c.Nodetool(wait, n.Index, "status")
		if err == nil {
			missing = missing[:0]
			up := upNormal(out)
			for _, m := range c.nodes {
				if _, running := c.livePID(m); running && m.Index != n.Index && !up[m.Addr] {
					missing = append(missing, m.Addr)
				}
			}
			if len(missing) == 0 {
				break
			}
		}
		if serverproc.Sleep(wait, time.Second) != nil { // each status is a JVM start
			if ctx.Err() != nil {
				return fmt.Errorf("node %d: waiting for its peers: %w", n.Index+1, ctx.Err())
			}
			log.Warn("restarted node opens its native port without seeing every peer up", "not_up", strings.Join(missing, ","), "waited", peersWait)
			break
		}
	}
	// JMX and gossip start before the daemon has set up its client transports, so the node
	// can see its peers before the port can be opened: enablebinary is refused until then.
	for {
		_, err := c.Nodetool(ctx, n.Index, "enablebinary")
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "setup() must be called first") {
			return fmt.Errorf("node %d: open the native port: %w", n.Index+1, err)
		}
		if exited, how := c.exitedDuringStart(n); exited {
			return c.exitError(n, how)
		}
		if err := serverproc.Sleep(ctx, time.Second); err != nil {
			return fmt.Errorf("node %d: open the native port: %w", n.Index+1, err)
		}
	}
	log.Info("restarted node sees its peers up; native port opened")
	return nil
}
