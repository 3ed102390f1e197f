package launcher

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Nodetool runs `nodetool -h 127.0.0.1 -p <jmx> args...` against node i, with the server's
// own jars (org.apache.cassandra.tools.NodeTool), and returns its standard output.
func (c *Cluster) Nodetool(ctx context.Context, i int, args ...string) (string, error) {
	n, err := c.node(i)
	if err != nil {
		return "", err
	}
	if err := c.prepare(ctx); err != nil {
		return "", err
	}
	jargs := []string{"-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
	jargs = append(jargs, jvm17Options...)
	jargs = append(jargs,
		"-Dlogback.configurationFile="+filepath.Join(n.ConfDir(), "logback-tools.xml"),
		"-Dcassandra.logdir="+n.LogDir(),
		// nodetool keeps a history file under ~/.cassandra; keep it in the node's dir.
		"-Duser.home="+n.Dir,
		"-cp", filepath.Join(c.lib, "*"),
		"org.apache.cassandra.tools.NodeTool",
		"-h", "127.0.0.1", "-p", strconv.Itoa(n.JMXPort),
	)
	jargs = append(jargs, args...)
	cmd := exec.CommandContext(ctx, "java", jargs...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("nodetool %s on node %d: %w: %s%s", strings.Join(args, " "), i+1, err,
			strings.TrimSpace(stderr.String()), lastLine(stdout.String()))
	}
	return stdout.String(), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return " " + s
}

// RepairOptions choose what `Repair` repairs.
type RepairOptions struct {
	Keyspace string
	Tables   []string // empty: the whole keyspace
	// Incremental runs 5.0's default incremental repair; false runs a full repair, which
	// compares all data and so also fixes replicas that incremental repair marked repaired.
	Incremental bool
}

// Repair runs `nodetool repair -pr` on every node in turn: each node repairs only its primary
// range, so the whole ring is repaired once, not once per replica.
func (c *Cluster) Repair(ctx context.Context, o RepairOptions) error {
	if o.Keyspace == "" {
		return fmt.Errorf("repair: keyspace is required")
	}
	for _, n := range c.nodes {
		args := []string{"repair", "-pr"}
		if !o.Incremental {
			args = append(args, "-full")
		}
		args = append(args, o.Keyspace)
		args = append(args, o.Tables...)
		log := c.opts.Logger.With("node", n.Index+1, "keyspace", o.Keyspace, "tables", strings.Join(o.Tables, ","))
		log.Info("repair started")
		out, err := c.Nodetool(ctx, n.Index, args...)
		if err != nil {
			return fmt.Errorf("repair: %w", err)
		}
		log.Info("repair finished", "summary", lastLine(out))
	}
	return nil
}
