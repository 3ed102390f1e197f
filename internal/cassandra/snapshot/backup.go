// Package snapshot backs up a Cassandra keyspace from every node's snapshot and restores it
// into an empty cluster of any size with sstableloader, so the rows go to their owners on the
// new ring.
//
// A backup directory holds schema.cql (DESCRIBE KEYSPACE, as the server prints it),
// <node address>/<table>/ with the files of that node's snapshot of the table (SSTable
// components, and the schema.cql and manifest.json Cassandra writes there), and
// manifest.json (internal/backup), sealed last.
//
// Consistency: each node's snapshot is that node's own flush at its own moment; the nodes are
// asked together, but a Cassandra snapshot across nodes is not one point in time. Because a
// restore loads every node's snapshot, a write acknowledged before the earliest node's snapshot
// began is in the restore whatever its consistency level (it was on at least one replica, and
// that replica's snapshot came after). That moment is the manifest's consistent_at. A write
// acknowledged at QUORUM (RF 3) before it is on at least 2 of the 3 replicas' snapshots, so it
// survives losing any one node's copy. Writes between the earliest and the latest snapshot may
// be in the restore, partly (on some tables, not others) or not at all: the restore is not a
// transaction-consistent image of that window.
package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/backup"
)

// SchemaFile is the keyspace's schema inside a backup directory.
const SchemaFile = "schema.cql"

// Manifest meta keys.
const (
	metaKeyspace    = "keyspace"
	metaTag         = "snapshot_tag"
	metaNodes       = "nodes"                 // JSON []NodeSnapshot
	metaCountsAfter = "counts_after_snapshot" // JSON map: the counts again after the snapshots, when they moved
	metaCounts      = "counts"                // how the counts were taken
)

// NodeSnapshot is one node's part of a backup, as the manifest records it.
type NodeSnapshot struct {
	Addr   string   `json:"addr"`
	DC     string   `json:"dc"`
	Tokens []string `json:"tokens"`
	// ConsistentAt is when the node was asked for its snapshot: every write the node had
	// applied before it is in the node's snapshot.
	ConsistentAt time.Time `json:"consistent_at"`
	// Done is when the node's snapshot command returned.
	Done time.Time `json:"done"`
	// CassandraCreatedAt is the created_at of the node's snapshot manifest.json (Cassandra's
	// own time of the snapshot, after its flush).
	CassandraCreatedAt time.Time `json:"cassandra_created_at"`
	Tables             int       `json:"tables"`
	Bytes              int64     `json:"bytes"`
}

// BackupOptions configure a backup.
type BackupOptions struct {
	Conn     Conn
	Keyspace string
	// Nodes run the per-node steps; there must be one per node of the ring.
	Nodes []Node
	// Out is the backup directory: made if missing, refused unless empty.
	Out string
	// Tag names the snapshot on the nodes; default shardmart-backup-<UTC time>.
	Tag string
	// Progress receives a line per step; nil discards them.
	Progress io.Writer
}

// Backup snapshots the keyspace on every node at once, copies the snapshots and the schema
// into o.Out, counts the rows at ALL, seals the manifest and clears the snapshots.
func Backup(ctx context.Context, o BackupOptions) (backup.Manifest, error) {
	started := time.Now().UTC()
	say := progress(o.Progress)
	if o.Keyspace == "" {
		return backup.Manifest{}, errors.New("backup: keyspace is required")
	}
	if err := backup.EmptyDir(o.Out); err != nil {
		return backup.Manifest{}, err
	}
	s, err := o.Conn.open(ctx)
	if err != nil {
		return backup.Manifest{}, fmt.Errorf("backup: %w", err)
	}
	defer s.Close()
	nodes, names, err := writeSchema(ctx, s, o)
	if err != nil {
		return backup.Manifest{}, fmt.Errorf("backup: %w", err)
	}
	say("keyspace %s: %d tables on %d nodes (%s)", o.Keyspace, len(names), len(nodes), strings.Join(addrs(nodes), ", "))
	countStart := time.Now()
	before, err := countRows(ctx, s, o.Keyspace, names)
	if err != nil {
		return backup.Manifest{}, fmt.Errorf("backup: %w", err)
	}
	say("counted %d rows in %d tables at ALL (%s)", sum(before), len(before), since(countStart))

	tag := o.Tag
	if tag == "" {
		tag = "shardmart-backup-" + started.Format("20060102T150405Z")
	}
	say("snapshot %s on every node at once (clear it by hand with `nodetool clearsnapshot -t %s -- %s` if this backup is killed)", tag, tag, o.Keyspace)
	snaps, err := snapshotAll(ctx, nodes, o.Keyspace, tag)
	// Clear whatever was taken, also after a failure: a snapshot holds its SSTables on disk.
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		clearStart := time.Now()
		if err := onEveryNode(nodes, func(n ringMember) error { return n.node.ClearSnapshot(cctx, o.Keyspace, tag) }); err != nil {
			say("could not clear snapshot %s: %v", tag, err)
			return
		}
		say("cleared snapshot %s on every node (%s)", tag, since(clearStart))
	}()
	if err != nil {
		return backup.Manifest{}, fmt.Errorf("backup: %w", err)
	}
	for _, sn := range snaps {
		say("  %s: snapshot asked %s, done %s (%s)", sn.Addr, sn.ConsistentAt.Format(time.RFC3339Nano), sn.Done.Format(time.RFC3339Nano), sn.Done.Sub(sn.ConsistentAt).Round(time.Millisecond))
	}
	if err := copySnapshots(ctx, o, nodes, tag, snaps, say); err != nil {
		return backup.Manifest{}, fmt.Errorf("backup: %w", err)
	}
	after, err := countRows(ctx, s, o.Keyspace, names)
	if err != nil {
		return backup.Manifest{}, fmt.Errorf("backup: %w", err)
	}
	m := manifest(o, started, tag, snaps, before, after, say)
	if err := backup.SyncTree(o.Out); err != nil {
		return backup.Manifest{}, fmt.Errorf("backup: sync %s: %w", o.Out, err)
	}
	m, err = backup.Seal(o.Out, m)
	if err != nil {
		return backup.Manifest{}, err
	}
	say("sealed %s: %d files, consistent at %s (%s in all)", o.Out, len(m.Files), m.ConsistentAt.Format(time.RFC3339Nano), since(started))
	return m, nil
}

// writeSchema pairs the ring with o.Nodes, lists the keyspace's tables and writes its schema
// into the backup directory.
func writeSchema(ctx context.Context, s *gocql.Session, o BackupOptions) ([]ringMember, []string, error) {
	nodes, err := matchRing(ring(s), o.Nodes)
	if err != nil {
		return nil, nil, err
	}
	names, err := tables(ctx, s, o.Keyspace)
	if err != nil {
		return nil, nil, err
	}
	if len(names) == 0 {
		return nil, nil, fmt.Errorf("keyspace %s has no tables (or does not exist)", o.Keyspace)
	}
	schema, err := describe(ctx, s, o.Keyspace)
	if err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Out, SchemaFile), []byte(strings.Join(schema, "\n\n")+"\n"), 0o640); err != nil {
		return nil, nil, err
	}
	return nodes, names, nil
}

// copySnapshots copies each node's snapshot tag into <out>/<node address> and records its
// tables and size in snaps.
func copySnapshots(ctx context.Context, o BackupOptions, nodes []ringMember, tag string, snaps []NodeSnapshot, say func(string, ...any)) error {
	for i, n := range nodes {
		copyStart := time.Now()
		dst := filepath.Join(o.Out, n.node.Addr())
		if err := n.node.CopySnapshot(ctx, o.Keyspace, tag, dst); err != nil {
			return fmt.Errorf("copy the snapshot of %s: %w", n.node.Addr(), err)
		}
		if err := describeCopy(dst, &snaps[i]); err != nil {
			return err
		}
		say("copied %s: %d tables, %.1f MiB (%s)", n.node.Addr(), snaps[i].Tables, float64(snaps[i].Bytes)/(1<<20), since(copyStart))
	}
	return nil
}

// manifest is the backup's manifest before sealing: consistent at the earliest snapshot, the
// counts from before the snapshots, and the counts after them too when writes moved them.
func manifest(o BackupOptions, started time.Time, tag string, snaps []NodeSnapshot, before, after map[string]int64, say func(string, ...any)) backup.Manifest {
	m := backup.Manifest{
		Store:        "cassandra",
		ConsistentAt: snaps[0].ConsistentAt,
		Started:      started,
		Source:       o.Keyspace + "@" + strings.Join(o.Conn.Hosts, ","),
		Counts:       before,
		Meta:         map[string]string{metaKeyspace: o.Keyspace, metaTag: tag},
	}
	for _, sn := range snaps {
		if sn.ConsistentAt.Before(m.ConsistentAt) {
			m.ConsistentAt = sn.ConsistentAt
		}
	}
	nb, _ := json.Marshal(snaps)
	m.Meta[metaNodes] = string(nb)
	if moved := movedTables(before, after); len(moved) > 0 {
		ab, _ := json.Marshal(after)
		m.Meta[metaCountsAfter] = string(ab)
		m.Meta[metaCounts] = "at ALL just before the snapshots, and again after them; writes ran meanwhile on " + strings.Join(moved, ", ") + ", so a restore takes any count between the two for those tables"
		say("writes ran during the snapshots: the counts of %s moved; a restore accepts a count between the two", strings.Join(moved, ", "))
	} else {
		m.Meta[metaCounts] = "at ALL just before the snapshots, and the same again after them: exact"
	}
	return m
}

// ringMember pairs a Node with the ring's view of it.
type ringMember struct {
	node Node
	ring ringNode
}

// matchRing pairs every ring member with a Node: a backup covers the whole ring or nothing.
func matchRing(r []ringNode, nodes []Node) ([]ringMember, error) {
	by := map[string]Node{}
	for _, n := range nodes {
		by[n.Addr()] = n
	}
	var out []ringMember
	var missing []string
	for _, rn := range r {
		n, ok := by[rn.Addr]
		if !ok {
			missing = append(missing, rn.Addr)
			continue
		}
		delete(by, rn.Addr)
		out = append(out, ringMember{node: n, ring: rn})
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no way to snapshot ring member(s) %s: a backup needs every node's snapshot", strings.Join(missing, ", "))
	}
	if len(by) > 0 {
		var extra []string
		for a := range by {
			extra = append(extra, a)
		}
		slices.Sort(extra)
		return nil, fmt.Errorf("node(s) %s are not in the ring the contact points show", strings.Join(extra, ", "))
	}
	return out, nil
}

// snapshotAll asks every node for its snapshot at the same moment.
func snapshotAll(ctx context.Context, nodes []ringMember, keyspace, tag string) ([]NodeSnapshot, error) {
	snaps := make([]NodeSnapshot, len(nodes))
	for i, n := range nodes {
		snaps[i] = NodeSnapshot{Addr: n.node.Addr(), DC: n.ring.DC, Tokens: n.ring.Tokens}
	}
	err := onEveryNode(nodes, func(n ringMember) error {
		i := slices.IndexFunc(snaps, func(s NodeSnapshot) bool { return s.Addr == n.node.Addr() })
		snaps[i].ConsistentAt = time.Now().UTC()
		defer func() { snaps[i].Done = time.Now().UTC() }()
		return n.node.Snapshot(ctx, keyspace, tag)
	})
	return snaps, err
}

// onEveryNode runs fn on every node at once and joins the errors.
func onEveryNode(nodes []ringMember, fn func(ringMember) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(n); err != nil {
				errs[i] = fmt.Errorf("%s: %w", n.node.Addr(), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// describeCopy fills in a node's copied tables, bytes and Cassandra's own snapshot time.
func describeCopy(dir string, sn *NodeSnapshot) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sn.Tables++
		var cm struct {
			CreatedAt time.Time `json:"created_at"`
		}
		if b, err := os.ReadFile(filepath.Join(dir, e.Name(), "manifest.json")); err == nil && json.Unmarshal(b, &cm) == nil {
			if cm.CreatedAt.After(sn.CassandraCreatedAt) {
				sn.CassandraCreatedAt = cm.CreatedAt
			}
		}
	}
	return filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		sn.Bytes += info.Size()
		return nil
	})
}

func movedTables(before, after map[string]int64) []string {
	var moved []string
	for t, n := range before {
		if after[t] != n {
			moved = append(moved, t)
		}
	}
	slices.Sort(moved)
	return moved
}

func addrs(nodes []ringMember) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.node.Addr())
	}
	return out
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }

// progress prints a line per step to w (nothing when w is nil).
func progress(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, format+"\n", args...)
		}
	}
}
