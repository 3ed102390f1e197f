package cli

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/cassandra/snapshot"
)

// restoreCassandraOptions are `restore cassandra`'s settings.
type restoreCassandraOptions struct {
	Hosts    []string
	Keyspace string
	Conn     cassandraConnFlags
	From     string
	RF       int
	Parallel int
	Timeout  time.Duration
}

func newCmdRestoreCassandra(stdio IO, runF func(context.Context, restoreCassandraOptions) error) *cobra.Command {
	var o restoreCassandraOptions
	cmd := &cobra.Command{
		Use:   "cassandra",
		Short: "Load a Cassandra backup into an empty cluster of any size with sstableloader, then check the counts",
		Long: `Verifies every file of --from against its manifest, creates the keyspace with
NetworkTopologyStrategy and --rf replicas in each data centre of the target (default: 3, or
the data centre's node count when smaller) and the backup's types and tables, then streams
every table's SSTables from every backed-up node with sstableloader, so each row goes to its
owners on the target's ring whatever its size. Then it counts every table at ALL and exits
non-zero on any difference with the manifest. A target keyspace that already holds tables is
refused. sstableloader runs from the Cassandra jars in the cache (fetched on first use).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.From == "" {
				return errors.New("--from is required: the backup directory")
			}
			if o.RF < 0 || o.RF > 9 {
				return errors.New("--rf: want 1 to 9, or 0 for min(3, nodes per data centre)")
			}
			return runOrRunF(cmd.Context(), stdio, o, restoreCassandra, runF)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Hosts, "cassandra-hosts", []string{"127.0.0.1"}, "contact points of the target cluster, comma-separated")
	f.StringVar(&o.Keyspace, "cassandra-keyspace", "", "target keyspace (default: the backup's)")
	f.StringVar(&o.From, "from", "", "backup directory written by shardmart backup cassandra")
	f.IntVar(&o.RF, "rf", 0, "replication factor in each data centre of the target (0: min(3, the data centre's nodes))")
	f.IntVar(&o.Parallel, "parallel", 2, "sstableloader JVMs at once, each streaming its share of the tables one after another")
	f.DurationVar(&o.Timeout, "timeout", 2*time.Hour, "give up after this long")
	o.Conn.register(f)
	fromEnv(f, "cassandra-hosts", "SHARDMART_CASSANDRA_HOSTS")
	fromEnv(f, "cassandra-keyspace", "SHARDMART_CASSANDRA_KEYSPACE")
	return cmd
}

func restoreCassandra(ctx context.Context, stdio IO, o restoreCassandraOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	conn, err := o.Conn.connection()
	if err != nil {
		return err
	}
	_, err = snapshot.Restore(ctx, snapshot.RestoreOptions{
		Conn: snapshot.Conn{Hosts: o.Hosts, Connection: conn}, Dir: o.From, Keyspace: o.Keyspace,
		RF: o.RF, Parallel: o.Parallel, Progress: stdio.Out,
	})
	return err
}
