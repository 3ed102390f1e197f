package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/cassandra"
)

// newCassandraSchemaCmd is `shardmart cassandra schema`: the versioned CQL schema of the
// Cassandra backend (internal/store/cassandra/schema).
func newCassandraSchemaCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schema",
		Short: "Versioned CQL schema of the Cassandra backend (carts, history, sessions, events, catalog)",
	}
	cmd.AddCommand(newCassandraSchemaApplyCmd(stdio))
	return cmd
}

func newCassandraSchemaApplyCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Create or upgrade the keyspace and tables; idempotent, waits for schema agreement",
		Long: `Creates the keyspace (NetworkTopologyStrategy with --rf replicas in --datacenter) or alters
its replication to match, applies every embedded schema version not yet recorded in
<keyspace>.schema_migrations, and sets the sessions' and guest carts' default TTL to
--session-ttl. Each change waits for schema agreement. Applying again changes nothing.
After raising --rf, run a full repair so the new replicas receive the existing data.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return err
			}
			f := cmd.Flags()
			hosts, _ := f.GetStringSlice("hosts")
			ks, _ := f.GetString("keyspace")
			rf, _ := f.GetInt("rf")
			dc, _ := f.GetString("datacenter")
			ttl, _ := f.GetDuration("session-ttl")
			timeout, _ := f.GetDuration("timeout")
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			start := time.Now()
			res, err := cassandra.ApplySchema(ctx, hosts, cassandra.SchemaOptions{Keyspace: ks, RF: rf, Datacenter: dc, SessionTTL: ttl})
			if err != nil {
				return err
			}
			if res.KeyspaceCreated {
				fmt.Fprintf(stdio.Out, "created keyspace %s (NetworkTopologyStrategy, %s: %d)\n", ks, dc, rf)
			}
			for _, a := range res.Altered {
				fmt.Fprintf(stdio.Out, "altered %s\n", a)
			}
			for _, v := range res.Applied {
				fmt.Fprintf(stdio.Out, "applied schema version %d\n", v)
			}
			if !res.KeyspaceCreated && len(res.Altered) == 0 && len(res.Applied) == 0 {
				fmt.Fprintf(stdio.Out, "schema of %s is up to date\n", ks)
			}
			fmt.Fprintf(stdio.Out, "keyspace %s at schema version %d on %s (%s)\n", ks, res.Version, strings.Join(hosts, ","), time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSlice("hosts", []string{"127.0.0.1"}, "contact points (comma-separated)")
	f.String("keyspace", cassandra.DefaultKeyspace, "keyspace")
	f.Int("rf", 1, "replication factor: 1 on one node, 3 on the local 3-node cluster")
	f.String("datacenter", "datacenter1", "datacenter name for NetworkTopologyStrategy")
	f.Duration("session-ttl", session.DefaultTTL, "default TTL of sessions and guest carts (seed 003: 168h, seed 002: 24h)")
	f.Duration("timeout", 5*time.Minute, "give up after this long")
	return cmd
}
