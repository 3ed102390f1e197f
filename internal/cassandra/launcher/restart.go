package launcher

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// A node that has data starts as a production node restarts: no gossip-settle or ring-delay
// shortcut (serverArgs), and its native port closed (start_native_transport: false) until it
// sees every other running node up in its own view, when the launcher opens it (nodetool
// enablebinary). Cassandra's own start-up check waits only until at most one peer of the local
// DC is down, so a node restarted while another was still rejoining took clients before it
// knew the third node was up; a second fault then left it coordinating with a peer it thought
// was down, and requests through it failed.

// peersWait bounds how long a restarted node waits for its peers before it opens its native
// port anyway (as Cassandra's block_for_peers_timeout does): a peer that is running but never
// comes up (frozen) must not keep the node from serving.
const peersWait = 2 * time.Minute

// The node's own log says what it sees: the failure detector's verdicts on its peers, and that
// start-up is done with the native port left closed (the transport is set up: enablebinary can
// open it). Reading the log costs nothing; a nodetool call per poll is a JVM start each.
var (
	peerVerdict  = regexp.MustCompile(`InetAddress /([0-9a-fA-F.:]+?)(?::\d+)? is now (UP|DOWN)`)
	nativeParked = "Not starting native transport as requested"
)

// restartView is what node n's log since its start says.
type restartView struct {
	up    map[string]bool // peers by address, per the last verdict on each
	setUp bool            // start-up finished with the native port closed
}

func readRestartView(n Node, from int64) (restartView, error) {
	v := restartView{up: map[string]bool{}}
	f, err := os.Open(n.SystemLog())
	if err != nil {
		return v, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return v, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := peerVerdict.FindStringSubmatch(line); m != nil {
			v.up[m[1]] = m[2] == "UP"
		}
		if strings.Contains(line, nativeParked) {
			v.setUp = true
		}
	}
	return v, sc.Err()
}

// openWhenPeersUp waits until restarted node n has finished starting and sees every other
// running node up, then enables its native transport; waitCQL follows.
func (c *Cluster) openWhenPeersUp(ctx context.Context, n Node) error {
	from := c.procs.LogOffset(n.Index, n.SystemLog())
	log := c.opts.Logger.With("node", n.Index+1, "addr", n.Addr)
	deadline := time.Now().Add(min(peersWait, c.opts.BootTimeout))
	for {
		if exited, how := c.exitedDuringStart(n); exited {
			return c.exitError(n, how)
		}
		v, err := readRestartView(n, from)
		if err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("node %d: read its log: %w", n.Index+1, err)
		}
		var missing []string
		for _, m := range c.nodes {
			if _, running := c.livePID(m); running && m.Index != n.Index && !v.up[m.Addr] {
				missing = append(missing, m.Addr)
			}
		}
		if v.setUp && len(missing) == 0 {
			break
		}
		if v.setUp && time.Now().After(deadline) {
			log.Warn("restarted node opens its native port without seeing every peer up", "not_up", strings.Join(missing, ","), "waited", peersWait)
			break
		}
		if err := serverproc.Sleep(ctx, pollInterval); err != nil {
			return fmt.Errorf("node %d: waiting to see its peers up (not yet: %s): %w", n.Index+1, strings.Join(missing, ","), err)
		}
	}
	if _, err := c.Nodetool(ctx, n.Index, "enablebinary"); err != nil {
		return fmt.Errorf("node %d: open the native port: %w", n.Index+1, err)
	}
	log.Info("restarted node sees its peers up; native port opened")
	return nil
}
