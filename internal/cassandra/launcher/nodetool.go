package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
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
	cmd := c.nodetoolCmd(ctx, n, args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("nodetool %s on node %d: %w: %s%s", strings.Join(args, " "), i+1, err,
			strings.TrimSpace(stderr.String()), lastLine(stdout.String()))
	}
	return stdout.String(), nil
}

// nodetoolCmd is the java command of `nodetool args` against node n.
func (c *Cluster) nodetoolCmd(ctx context.Context, n Node, args []string) *exec.Cmd {
	jargs := nodetoolJVMArgs(c.cdsArgs(c.cds.nodetool, "nodetool.lst"), c.cp,
		filepath.Join(n.ConfDir(), "logback-tools.xml"), n.LogDir(), n.Dir)
	jargs = append(jargs, "-h", "127.0.0.1", "-p", strconv.Itoa(n.JMXPort))
	jargs = append(jargs, args...)
	return exec.CommandContext(ctx, "java", jargs...)
}

// nodetoolJVMArgs are java's arguments up to NodeTool's own: a small client JVM on the
// server's jars. nodetool keeps a history file, and reads nodetool-ssl.properties, under
// ~/.cassandra: home is what it takes as ~.
func nodetoolJVMArgs(cds []string, cp, logback, logDir, home string) []string {
	jargs := []string{"-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
	jargs = append(jargs, cds...)
	jargs = append(jargs, jvm17Options...)
	return append(jargs,
		"-Dlogback.configurationFile="+logback,
		"-Dcassandra.logdir="+logDir,
		"-Duser.home="+home,
		"-cp", cp,
		"org.apache.cassandra.tools.NodeTool",
	)
}

// Tool runs nodetool from the cached server jars against any node, by host and JMX port: for
// commands that work on clusters the launcher did not start (cassandra repair).
type Tool struct {
	jvm []string
}

// NewTool fetches the jars of version into cacheDir if need be and lays out home, nodetool's
// private home directory (its history, and the .cassandra/nodetool-ssl.properties the caller may
// write there). It uses the class-data sharing archive when one was made (`shardmart cassandra
// fetch`), never training one itself.
func NewTool(ctx context.Context, cacheDir, version, home string) (*Tool, error) {
	if err := CheckPrerequisites(ctx); err != nil {
		return nil, err
	}
	lib, err := EnsureJars(ctx, cacheDir, version)
	if err != nil {
		return nil, err
	}
	cp, err := jarClasspath(lib)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(home, ".cassandra"), 0o700); err != nil {
		return nil, fmt.Errorf("nodetool home: %w", err)
	}
	logback := filepath.Join(home, "logback-tools.xml")
	if err := os.WriteFile(logback, []byte(toolsLogbackXML), 0o600); err != nil {
		return nil, fmt.Errorf("nodetool home: %w", err)
	}
	var cds []string
	if !strings.EqualFold(os.Getenv(cdsEnv), "off") {
		if key, err := javaKey(ctx); err == nil {
			dir := filepath.Join(filepath.Dir(lib), "cds-"+key)
			if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
				cds = []string{"-Xshare:auto", "-XX:SharedArchiveFile=" + filepath.Join(dir, "nodetool.jsa")}
			}
		}
	}
	return &Tool{jvm: nodetoolJVMArgs(cds, cp, logback, home, home)}, nil
}

// Command is the java command of `nodetool -h host -p port args...`; global options such as
// -u, -pwf and --ssl go first in args. The JVM dies with the calling process: a repairer killed
// mid-segment leaves no nodetool behind (the repair inside the server goes on regardless).
func (t *Tool) Command(ctx context.Context, host string, port int, args ...string) *exec.Cmd {
	jargs := append(slices.Clone(t.jvm), "-h", host, "-p", strconv.Itoa(port))
	cmd := exec.CommandContext(ctx, "java", append(jargs, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
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

// DefaultRepairSkip are the tables scheduled repair leaves out: sessions and click events
// are short-lived or statistical (hinted handoff only, no anti-entropy), so a
// repair's network and disk cost buys nothing there.
var DefaultRepairSkip = []string{"*session*", "*event*"}

// RepairOptions choose what Repair repairs.
type RepairOptions struct {
	Keyspace string
	// Tables to repair; empty means every table of the keyspace except those matching Skip.
	Tables []string
	Skip   []string // path.Match patterns, applied to discovered tables only
	// Incremental runs 5.0's default incremental repair; false runs a full repair, which
	// compares all data and so also fixes replicas that incremental repair marked repaired.
	Incremental bool
}

// Repair runs `nodetool repair -pr` on every node in turn: each node repairs only its primary
// range, so the whole ring is repaired once, not once per replica. It returns the tables
// repaired. Every node must be up: repair compares all replicas.
func (c *Cluster) Repair(ctx context.Context, o RepairOptions) ([]string, error) {
	if o.Keyspace == "" {
		return nil, fmt.Errorf("repair: keyspace is required")
	}
	for _, n := range c.nodes {
		if _, ok := c.livePID(n); !ok {
			return nil, fmt.Errorf("repair: node %d (%s) is down; repair needs every replica", n.Index+1, n.Addr)
		}
	}
	rf, err := c.replicationFactor(ctx, o.Keyspace)
	if err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	if rf < 2 {
		// nodetool answers "no repair is needed" here and exits 0; say so rather than "repaired".
		return nil, fmt.Errorf("%w: keyspace %s has replication factor %d", ErrSingleReplica, o.Keyspace, rf)
	}
	tables := o.Tables
	if len(tables) == 0 {
		all, err := c.tables(ctx, o.Keyspace)
		if err != nil {
			return nil, fmt.Errorf("repair: %w", err)
		}
		tables = selectTables(all, o.Skip)
		if len(tables) == 0 {
			return nil, fmt.Errorf("repair: keyspace %s has no table to repair (tables %v, skip %v)", o.Keyspace, all, o.Skip)
		}
	}
	for _, n := range c.nodes {
		args := []string{"repair", "-pr"}
		if !o.Incremental {
			args = append(args, "-full")
		}
		args = append(args, o.Keyspace)
		args = append(args, tables...)
		log := c.opts.Logger.With("node", n.Index+1, "keyspace", o.Keyspace, "tables", strings.Join(tables, ","))
		log.Info("repair started")
		out, err := c.Nodetool(ctx, n.Index, args...)
		if err != nil {
			return nil, fmt.Errorf("repair: %w", err)
		}
		log.Info("repair finished", "summary", strings.TrimSpace(lastLine(out)))
	}
	return tables, nil
}

// ErrSingleReplica: every row has one replica, so there is nothing to compare and no repair.
var ErrSingleReplica = errors.New("no repair needed: every row has a single replica")

// replicationFactor is the keyspace's largest replication factor over its data centres.
func (c *Cluster) replicationFactor(ctx context.Context, keyspace string) (int, error) {
	var repl map[string]string
	err := c.onLiveNode(ctx, func(s *gocql.Session) error {
		return s.Query("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?", keyspace).
			WithContext(ctx).Scan(&repl)
	})
	if errors.Is(err, gocql.ErrNotFound) {
		return 0, fmt.Errorf("keyspace %s does not exist (apply the schema first: shardmart cassandra schema apply)", keyspace)
	}
	if err != nil {
		return 0, fmt.Errorf("read replication of %s: %w", keyspace, err)
	}
	rf := 0
	for k, v := range repl {
		if k == "class" {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > rf {
			rf = n
		}
	}
	return rf, nil
}

// onLiveNode runs fn with a session on the first running node.
func (c *Cluster) onLiveNode(ctx context.Context, fn func(*gocql.Session) error) error {
	for _, n := range c.nodes {
		if _, ok := c.livePID(n); !ok {
			continue
		}
		s, err := c.singleHostSession(n.Addr)
		if err != nil {
			return err
		}
		defer s.Close()
		return fn(s)
	}
	return fmt.Errorf("no node is running")
}

// selectTables drops the tables matching any skip pattern.
func selectTables(all, skip []string) []string {
	var out []string
next:
	for _, t := range all {
		for _, p := range skip {
			if ok, _ := path.Match(p, t); ok {
				continue next
			}
		}
		out = append(out, t)
	}
	return out
}

// tables lists the keyspace's tables from the first running node.
func (c *Cluster) tables(ctx context.Context, keyspace string) ([]string, error) {
	var names []string
	err := c.onLiveNode(ctx, func(s *gocql.Session) error {
		iter := s.Query("SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?", keyspace).IterContext(ctx)
		var name string
		for iter.Scan(&name) {
			names = append(names, name)
		}
		if err := iter.Close(); err != nil {
			return fmt.Errorf("list tables of %s: %w", keyspace, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("keyspace %s has no tables (apply the schema first: shardmart cassandra schema apply)", keyspace)
	}
	sort.Strings(names)
	return names, nil
}
