package launcher

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// StaleView is a running node that does not see a running peer UN although another node does.
type StaleView struct {
	Observer, Peer, Witness int // node indexes, 0-based
}

func (s StaleView) String() string {
	return fmt.Sprintf("node %d does not see node %d up, node %d does", s.Observer+1, s.Peer+1, s.Witness+1)
}

// StaleViews asks every running node for its ring view and returns the views that lag behind
// another node's: a peer one node sees UN and another does not.
func (c *Cluster) StaleViews(ctx context.Context) ([]StaleView, error) {
	views := map[int]map[string]bool{}
	for _, n := range c.nodes {
		if _, ok := c.livePID(n); !ok {
			continue
		}
		out, err := c.Nodetool(ctx, n.Index, "status")
		if err != nil {
			return nil, err
		}
		views[n.Index] = upNormal(out)
	}
	return staleViews(c.nodes, views), nil
}

// staleViews compares the running nodes' ring views (each node's set of addresses it sees
// UN, keyed by node index). The witness is a third node: every node sees itself up, so a peer
// only it sees up is a partition, not a lagging view.
func staleViews(nodes []Node, views map[int]map[string]bool) []StaleView {
	var stale []StaleView
	for _, obs := range nodes {
		view, ok := views[obs.Index]
		if !ok {
			continue
		}
		for _, peer := range nodes {
			if _, running := views[peer.Index]; !running || view[peer.Addr] {
				continue
			}
			for _, wit := range nodes {
				if wit.Index != obs.Index && wit.Index != peer.Index && views[wit.Index][peer.Addr] {
					stale = append(stale, StaleView{Observer: obs.Index, Peer: peer.Index, Witness: wit.Index})
					break
				}
			}
		}
	}
	return stale
}

// WaitConvergedRestartingStale is WaitConverged for a cluster that has just been through
// faults. A node's gossip can keep a restarted peer DOWN long after the other nodes saw it come
// back (seen at load 30: for six minutes and more, while the third node saw it UN within
// seconds); Cassandra does not retry that node's check of the peer, and an operator cures it
// by restarting the node with the stale view. This waits for the ring to converge in rounds of
// stuck; after each round that ends unconverged it compares the views again (a lag may show
// only after a peer that was itself still starting is up) and restarts each lagging observer
// (SIGTERM, then StartNode), at most once per node, reporting that through logf, until ctx ends.
func (c *Cluster) WaitConvergedRestartingStale(ctx context.Context, stuck time.Duration, logf func(format string, args ...any)) error {
	restarted := map[int]bool{}
	for {
		round, cancel := context.WithTimeout(ctx, stuck)
		err := c.WaitConverged(round)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		stale, verr := c.StaleViews(ctx)
		if verr != nil {
			if ctx.Err() != nil {
				return errors.Join(err, verr)
			}
			continue // a node mid-start answers no status: ask again after the next round
		}
		for _, s := range stale {
			if restarted[s.Observer] {
				continue
			}
			restarted[s.Observer] = true
			logf("ring not converged after %s: %s; restarting node %d", stuck, s, s.Observer+1)
			if err := c.StopNode(ctx, s.Observer); err != nil {
				return err
			}
			if err := c.StartNode(ctx, s.Observer); err != nil {
				return err
			}
		}
	}
}
