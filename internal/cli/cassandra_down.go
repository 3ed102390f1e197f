package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// cassandraDownOptions are `cassandra down`'s settings.
type cassandraDownOptions struct {
	Cluster cassandraClusterOptions
}

func newCmdCassandraDown(stdio IO, cl *cassandraClusterOptions, runF func(context.Context, cassandraDownOptions) error) *cobra.Command {
	return newCmdCassandraClusterVerb(stdio, cl, "down",
		"Stop every node the directory holds (SIGTERM, then SIGKILL after a grace period)", cassandraDown, runF)
}

func cassandraDown(ctx context.Context, stdio IO, o cassandraDownOptions) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, others, err := launcher.DownDir(ctx, o.Cluster.Dir, cassandraLogger(stdio))
	if c != nil {
		fmt.Fprintln(stdio.Out, "cassandra stopped")
	}
	if others > 0 {
		fmt.Fprintf(stdio.Out, "%d other cassandra node(s) stopped (cluster.json does not list them)\n", others)
	}
	if err != nil {
		return err
	}
	if c == nil && others == 0 {
		fmt.Fprintln(stdio.Out, "no cluster to stop")
	}
	return nil
}
