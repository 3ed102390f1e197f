package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/cassandrastore"
)

// cassandraSchemaApplyOptions are `cassandra schema apply`'s settings.
type cassandraSchemaApplyOptions struct {
	Hosts      []string
	Keyspace   string
	RF         int
	Datacenter string
	// Replication is per data centre ("dc1:3,dc2:3"); it replaces RF and Datacenter.
	Replication string
	SessionTTL  time.Duration
	Timeout     time.Duration
	Conn        cassandraConnFlags
}

// newCmdCassandraSchema is `shardmart cassandra schema`: the versioned CQL schema of the
// Cassandra backend (internal/store/cassandrastore/schema).
func newCmdCassandraSchema(stdio IO, runF func(context.Context, cassandraSchemaApplyOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Versioned CQL schema of the Cassandra backend (carts, history, sessions, events, catalog)",
	}
	cmd.AddCommand(newCmdCassandraSchemaApply(stdio, runF))
	return cmd
}

func newCmdCassandraSchemaApply(stdio IO, runF func(context.Context, cassandraSchemaApplyOptions) error) *cobra.Command {
	var o cassandraSchemaApplyOptions
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Create or upgrade the keyspace and tables; idempotent, waits for schema agreement",
		Long: `Creates the keyspace (NetworkTopologyStrategy with --rf replicas in --datacenter, or
--replication dc1:3,dc2:3 for several data centres) or alters its replication to match, applies every embedded schema version not yet recorded in
<keyspace>.schema_migrations, and sets the sessions' and guest carts' default TTL to
--session-ttl. Each change waits for schema agreement. Applying again changes nothing.
After raising --rf, run a full repair so the new replicas receive the existing data.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOrRunF(cmd.Context(), stdio, o, cassandraSchemaApply, runF)
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Hosts, "hosts", []string{"127.0.0.1"}, "contact points (comma-separated)")
	f.StringVar(&o.Keyspace, "keyspace", cassandrastore.DefaultKeyspace, "keyspace")
	f.IntVar(&o.RF, "rf", 1, "replication factor: 1 on one node, 3 on the local 3-node cluster")
	f.StringVar(&o.Datacenter, "datacenter", "datacenter1", "datacenter name for NetworkTopologyStrategy")
	f.StringVar(&o.Replication, "replication", "", "replication factor per data centre, e.g. dc1:3,dc2:3 (replaces --rf and --datacenter)")
	o.Conn.register(f)
	f.DurationVar(&o.SessionTTL, "session-ttl", session.DefaultTTL, "default TTL of sessions and guest carts")
	f.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "give up after this long")
	// The same deployment settings as serve's --cassandra-hosts and --cassandra-keyspace.
	fromEnv(f, "hosts", "SHARDMART_CASSANDRA_HOSTS")
	fromEnv(f, "keyspace", "SHARDMART_CASSANDRA_KEYSPACE")
	return cmd
}

func cassandraSchemaApply(ctx context.Context, stdio IO, o cassandraSchemaApplyOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	start := time.Now()
	ks, dc, rf := o.Keyspace, o.Datacenter, o.RF
	conn, err := o.Conn.connection()
	if err != nil {
		return err
	}
	so := cassandrastore.SchemaOptions{Keyspace: ks, RF: rf, Datacenter: dc, SessionTTL: o.SessionTTL, Conn: conn}
	repl := fmt.Sprintf("%s: %d", dc, rf)
	if o.Replication != "" {
		if so.Replication, err = cassandrastore.ParseReplication(o.Replication); err != nil {
			return fmt.Errorf("--replication: %w", err)
		}
		repl = o.Replication
	}
	res, err := cassandrastore.ApplySchema(ctx, o.Hosts, so)
	if err != nil {
		return err
	}
	if res.KeyspaceCreated {
		fmt.Fprintf(stdio.Out, "created keyspace %s (NetworkTopologyStrategy, %s)\n", ks, repl)
	}
	for _, a := range res.Altered {
		fmt.Fprintf(stdio.Out, "altered %s\n", a)
	}
	if res.Baseline > 0 {
		fmt.Fprintf(stdio.Out, "created every table at schema version %d in one pass (the baseline)\n", res.Baseline)
	}
	for _, v := range res.Applied {
		fmt.Fprintf(stdio.Out, "applied schema version %d\n", v)
	}
	if !res.KeyspaceCreated && len(res.Altered) == 0 && len(res.Applied) == 0 {
		fmt.Fprintf(stdio.Out, "schema of %s is up to date\n", ks)
	}
	fmt.Fprintf(stdio.Out, "keyspace %s at schema version %d on %s (%s)\n", ks, res.Version, strings.Join(o.Hosts, ","), time.Since(start).Round(time.Millisecond))
	return nil
}
