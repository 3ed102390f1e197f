package repair

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// Target is where nodetool reaches one node: its JMX host and port. Node is the node's
// broadcast address (system.peers), which is the JMX host unless the targets say otherwise
// (JMX behind a local-only listener or a tunnel).
type Target struct {
	Node string
	Host string
	Port int
}

func (t Target) String() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// ParseTargets reads targets, one per line or comma-separated: "host:port" (the node's own
// address and its JMX port) or "node=host:port" (JMX reached at another address). Blank
// lines and text after # are ignored.
func ParseTargets(text string) ([]Target, error) {
	var out []Target
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for line := 1; sc.Scan(); line++ {
		l := sc.Text()
		if i := strings.IndexByte(l, '#'); i >= 0 {
			l = l[:i]
		}
		for f := range strings.FieldsFuncSeq(l, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
			node, jmx, named := strings.Cut(f, "=")
			if !named {
				jmx = f
			}
			host, port, err := net.SplitHostPort(jmx)
			if err != nil {
				return nil, fmt.Errorf("target %q (line %d): want host:jmxport or node=host:jmxport: %w", f, line, err)
			}
			p, err := strconv.Atoi(port)
			if err != nil || p < 1 || p > 65535 {
				return nil, fmt.Errorf("target %q (line %d): JMX port %q is not a port number", f, line, port)
			}
			if !named {
				node = host
			}
			if seen[node] {
				return nil, fmt.Errorf("target %q (line %d): node %s is given twice", f, line, node)
			}
			seen[node] = true
			out = append(out, Target{Node: node, Host: host, Port: p})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no JMX targets: want host:jmxport per node")
	}
	return out, nil
}

// Nodetool runs one nodetool command against a node: the real nodetool in production and in
// the tests, behind an interface so the repairer does not care how the JVM is started.
type Nodetool interface {
	Run(ctx context.Context, t Target, args ...string) (string, error)
}

// Credentials log nodetool in to JMX (the nodes' jmxremote.password users).
type Credentials struct {
	User     string
	Password string
}

// JVMOptions choose how JVMNodetool reaches JMX.
type JVMOptions struct {
	CacheDir, Version string
	// Home is nodetool's private home (history, password file, SSL properties); it is created
	// with mode 0700. Empty: a temporary directory, removed by Close.
	Home        string
	Credentials Credentials
	// SSLProperties, when set, is a nodetool-ssl.properties file (javax.net.ssl.trustStore,
	// trustStorePassword, keyStore, keyStorePassword, ...): nodetool then runs with --ssl and
	// reads it from its home, so no store password is on a command line.
	SSLProperties string
}

// JVMNodetool runs org.apache.cassandra.tools.NodeTool from the cached server jars.
type JVMNodetool struct {
	tool   *launcher.Tool
	global []string
	home   string
	temp   bool
}

// NewJVMNodetool prepares the jars and nodetool's home: the JMX password goes to a 0600
// file given with -pwf, never to the command line.
func NewJVMNodetool(ctx context.Context, o JVMOptions) (*JVMNodetool, error) {
	home, temp := o.Home, false
	if home == "" {
		d, err := os.MkdirTemp("", "shardmart-nodetool-")
		if err != nil {
			return nil, fmt.Errorf("nodetool home: %w", err)
		}
		home, temp = d, true
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("nodetool home: %w", err)
	}
	n := &JVMNodetool{home: home, temp: temp}
	global, err := n.globalOptions(o)
	if err != nil {
		n.Close()
		return nil, err
	}
	n.global = global
	if o.Version == "" {
		o.Version = launcher.DefaultVersion
	}
	if o.CacheDir == "" {
		o.CacheDir = launcher.DefaultCacheDir()
	}
	if n.tool, err = launcher.NewTool(ctx, o.CacheDir, o.Version, home); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// globalOptions writes the password and SSL files into home and returns nodetool's options
// naming them.
func (n *JVMNodetool) globalOptions(o JVMOptions) ([]string, error) {
	var args []string
	if c := o.Credentials; c.User != "" {
		if c.Password == "" {
			return nil, fmt.Errorf("JMX user %s has no password", c.User)
		}
		// nodetool's -pwf file has jmxremote.password's format: "user password" per line.
		pwf := filepath.Join(n.home, "jmx.password")
		if err := os.WriteFile(pwf, []byte(c.User+" "+c.Password+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("JMX password file: %w", err)
		}
		args = append(args, "-u", c.User, "-pwf", pwf)
	}
	if o.SSLProperties != "" {
		b, err := os.ReadFile(o.SSLProperties)
		if err != nil {
			return nil, fmt.Errorf("JMX SSL properties: %w", err)
		}
		if err := os.MkdirAll(filepath.Join(n.home, ".cassandra"), 0o700); err != nil {
			return nil, fmt.Errorf("nodetool home: %w", err)
		}
		if err := os.WriteFile(filepath.Join(n.home, ".cassandra", "nodetool-ssl.properties"), b, 0o600); err != nil {
			return nil, fmt.Errorf("JMX SSL properties: %w", err)
		}
		args = append(args, "--ssl")
	}
	return args, nil
}

// Run runs nodetool against t; a context that ends kills the JVM.
func (n *JVMNodetool) Run(ctx context.Context, t Target, args ...string) (string, error) {
	cmd := n.tool.Command(ctx, t.Host, t.Port, append(append([]string(nil), n.global...), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return stdout.String(), fmt.Errorf("nodetool %s on %s (%s): %w", strings.Join(args, " "), t.Node, t, ctx.Err())
		}
		msg := strings.TrimSpace(stderr.String() + "\n" + lastLines(stdout.String(), 3))
		return stdout.String(), fmt.Errorf("nodetool %s on %s (%s): %w: %s", strings.Join(args, " "), t.Node, t, err, msg)
	}
	return stdout.String(), nil
}

// Close removes a temporary home.
func (n *JVMNodetool) Close() {
	if n.temp {
		_ = os.RemoveAll(n.home)
	}
}

func lastLines(s string, k int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > k {
		lines = lines[len(lines)-k:]
	}
	return strings.Join(lines, "\n")
}
