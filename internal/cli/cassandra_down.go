package cli

import (
	"context"
	"errors"
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
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the local cluster (SIGTERM, then SIGKILL after a grace period)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := cassandraDownOptions{Cluster: *cl}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return cassandraDown(cmd.Context(), stdio, o)
		},
	}
}

func cassandraDown(ctx context.Context, stdio IO, o cassandraDownOptions) error {
	c, err := o.Cluster.open(stdio)
	if errors.Is(err, launcher.ErrNoCluster) {
		fmt.Fprintln(stdio.Out, "no cluster to stop")
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := c.Down(ctx); err != nil {
		return err
	}
	fmt.Fprintln(stdio.Out, "cassandra stopped")
	return nil
}
