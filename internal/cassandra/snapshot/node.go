package snapshot

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// Node is one Cassandra node as a backup sees it: the steps that must run where the node's data
// directory is. On a production cluster each runs on the node's host (over ssh or an agent):
// `nodetool snapshot -t <tag> <keyspace>`, a copy of
// <data_file_directories>/<keyspace>/<table>-<id>/snapshots/<tag>/ off the host, then
// `nodetool clearsnapshot -t <tag> -- <keyspace>`. LocalNodes runs them for a cluster of the
// launcher, whose data directories are on this machine.
type Node interface {
	// Addr is the node's address as the ring knows it (system.local's broadcast address).
	Addr() string
	// Snapshot flushes the keyspace's memtables and hard-links its SSTables under tag.
	Snapshot(ctx context.Context, keyspace, tag string) error
	// CopySnapshot copies each table's snapshot tag into dst/<table>/ (every file Cassandra
	// put there: the SSTable components, schema.cql and manifest.json).
	CopySnapshot(ctx context.Context, keyspace, tag, dst string) error
	// ClearSnapshot removes the snapshot tag from the node.
	ClearSnapshot(ctx context.Context, keyspace, tag string) error
}

// LocalNodes are the nodes of a launcher cluster: nodetool runs on this machine against each
// node's JMX port and the snapshots are copied from the nodes' data directories.
func LocalNodes(c *launcher.Cluster) []Node {
	var out []Node
	for _, n := range c.Nodes() {
		out = append(out, localNode{c: c, n: n})
	}
	return out
}

type localNode struct {
	c *launcher.Cluster
	n launcher.Node
}

func (l localNode) Addr() string { return l.n.Addr }

func (l localNode) Snapshot(ctx context.Context, keyspace, tag string) error {
	_, err := l.c.Nodetool(ctx, l.n.Index, "snapshot", "-t", tag, "--", keyspace)
	return err
}

func (l localNode) ClearSnapshot(ctx context.Context, keyspace, tag string) error {
	_, err := l.c.Nodetool(ctx, l.n.Index, "clearsnapshot", "-t", tag, "--", keyspace)
	return err
}

// tableDir is a table's data directory name: the table name, a dash and its id in hex.
var tableDir = regexp.MustCompile(`^(.+)-[0-9a-f]{32}$`)

func (l localNode) CopySnapshot(ctx context.Context, keyspace, tag, dst string) error {
	ksDir := filepath.Join(l.n.DataDir(), "data", keyspace)
	ents, err := os.ReadDir(ksDir)
	if err != nil {
		return fmt.Errorf("node %s: %w", l.n.Addr, err)
	}
	copied := 0
	for _, e := range ents {
		m := tableDir.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		src := filepath.Join(ksDir, e.Name(), "snapshots", tag)
		if _, err := os.Stat(src); os.IsNotExist(err) {
			continue // a dropped table's directory, or one created after the snapshot
		}
		if err := copyTree(ctx, src, filepath.Join(dst, m[1])); err != nil {
			return fmt.Errorf("node %s: table %s: %w", l.n.Addr, m[1], err)
		}
		copied++
	}
	if copied == 0 {
		return fmt.Errorf("node %s: no snapshot %q of keyspace %s under %s", l.n.Addr, tag, keyspace, ksDir)
	}
	return nil
}

// copyTree copies the regular files under src into dst, keeping the layout (a secondary
// index's SSTables sit in a subdirectory).
func copyTree(ctx context.Context, src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o750)
		}
		return copyFile(p, filepath.Join(dst, rel))
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
