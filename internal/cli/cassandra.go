package cli

import (
	"context"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// defaultCassandraDir sits under ./data, which git ignores, next to the embedded store.
const defaultCassandraDir = "data/cassandra"

// cassandraClusterOptions are the cassandra group's persistent flags: where the local
// cluster that `up` wrote lives.
type cassandraClusterOptions struct {
	Dir string
}

// newCmdCassandra groups the local Cassandra cluster commands and the schema.
func newCmdCassandra(stdio IO) *cobra.Command {
	cl := &cassandraClusterOptions{}
	return newCassandraGroup(cl,
		newCmdCassandraUp(stdio, cl, nil),
		newCmdCassandraDown(stdio, cl, nil),
		newCmdCassandraStatus(stdio, cl, nil),
		newCmdCassandraRepair(stdio, cl, nil),
		newCmdCassandraNodetool(stdio, cl, nil),
		newCmdCassandraFetch(stdio),
		newCmdCassandraSchema(stdio, nil),
	)
}

// newCassandraGroup binds the group's persistent flags to cl and adds the verbs built on it.
func newCassandraGroup(cl *cassandraClusterOptions, verbs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cassandra",
		Short: "Local Apache Cassandra cluster (up, down, status, repair, nodetool) and the schema",
	}
	cmd.PersistentFlags().StringVar(&cl.Dir, "cassandra-dir", defaultCassandraDir, "cluster directory: per-node config, data, logs, pidfiles")
	cmd.AddCommand(verbs...)
	return cmd
}

func cassandraLogger(stdio IO) *slog.Logger {
	return slog.New(slog.NewTextHandler(stdio.Err, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// newCmdCassandraClusterVerb builds a verb whose only setting is the group's cluster directory
// (down, status): it runs run, or runF if not nil (tests).
func newCmdCassandraClusterVerb[O ~struct{ Cluster cassandraClusterOptions }](stdio IO, cl *cassandraClusterOptions, use, short string, run func(context.Context, IO, O) error, runF func(context.Context, O) error) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOrRunF(cmd.Context(), stdio, O{Cluster: *cl}, run, runF)
		},
	}
}

// open opens the cluster that `up` wrote.
func (cl cassandraClusterOptions) open(stdio IO) (*launcher.Cluster, error) {
	return launcher.Open(cl.Dir, cassandraLogger(stdio))
}
