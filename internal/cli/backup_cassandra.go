package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
	"github.com/shardmart/shardmart/internal/cassandra/snapshot"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// backupCassandraOptions are `backup cassandra`'s settings.
type backupCassandraOptions struct {
	Hosts    []string
	Keyspace string
	Conn     cassandraConnFlags
	// ClusterDir is the launcher cluster whose nodes run the per-node steps.
	ClusterDir string
	Out        string
	Timeout    time.Duration
}

func newCmdBackupCassandra(stdio IO, runF func(context.Context, backupCassandraOptions) error) *cobra.Command {
	var o backupCassandraOptions
	cmd := &cobra.Command{
		Use:   "cassandra",
		Short: "Snapshot the keyspace on every node at once and copy the snapshots and the schema into --out",
		Long: `Counts every table's rows at ALL, runs nodetool snapshot on every node at the same
moment (each node flushes, then hard-links its SSTables), copies each node's snapshot into
<out>/<node address>/<table>/ with the keyspace's schema (schema.cql), counts again, seals
manifest.json and clears the snapshots.

Each node's snapshot is its own moment: the manifest's consistent_at is the earliest, and a
write acknowledged before it is in the backup. Writes during the snapshots may be in it in
part. The per-node steps run in this process against the local cluster of --cassandra-dir (nodetool
over JMX, the data directories on the local disk); on a production cluster they run on each node's
host: see docs/operations.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Out == "" {
				return errors.New("--out is required: an empty or new directory for the backup")
			}
			return runOrRunF(cmd.Context(), stdio, o, backupCassandra, runF)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Hosts, "cassandra-hosts", []string{"127.0.0.1"}, "Cassandra contact points, comma-separated")
	f.StringVar(&o.Keyspace, "cassandra-keyspace", cassandrastore.DefaultKeyspace, "keyspace to back up")
	f.StringVar(&o.ClusterDir, "cassandra-dir", defaultCassandraDir, "directory of the local cluster (shardmart cassandra up) whose nodes are snapshotted")
	f.StringVar(&o.Out, "out", "", "backup directory (made if missing; must be empty)")
	f.DurationVar(&o.Timeout, "timeout", time.Hour, "give up after this long")
	o.Conn.register(f)
	fromEnv(f, "cassandra-hosts", "SHARDMART_CASSANDRA_HOSTS")
	fromEnv(f, "cassandra-keyspace", "SHARDMART_CASSANDRA_KEYSPACE")
	return cmd
}

func backupCassandra(ctx context.Context, stdio IO, o backupCassandraOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	conn, err := o.Conn.connection()
	if err != nil {
		return err
	}
	c, err := launcher.Open(o.ClusterDir, cassandraLogger(stdio))
	if err != nil {
		return fmt.Errorf("backup cassandra: the nodes to snapshot: %w", err)
	}
	_, err = snapshot.Backup(ctx, snapshot.BackupOptions{
		Conn: snapshot.Conn{Hosts: o.Hosts, Connection: conn}, Keyspace: o.Keyspace,
		Nodes: snapshot.LocalNodes(c), Out: o.Out, Progress: stdio.Out,
	})
	return err
}
