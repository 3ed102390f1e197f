package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

// cassandraNodetoolOptions are `cassandra nodetool`'s settings.
type cassandraNodetoolOptions struct {
	Cluster cassandraClusterOptions
	Node    int // 1-based
	Args    []string
}

func newCmdCassandraNodetool(stdio IO, cl *cassandraClusterOptions, runF func(context.Context, cassandraNodetoolOptions) error) *cobra.Command {
	var o cassandraNodetoolOptions
	cmd := &cobra.Command{
		Use:   "nodetool [--node N] -- ARGS...",
		Short: "Run nodetool against one node of the local cluster",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Cluster, o.Args = *cl, args
			return runOrRunF(cmd.Context(), stdio, o, cassandraNodetool, runF)
		},
	}
	cmd.Flags().IntVar(&o.Node, "node", 1, "node number (1-based)")
	return cmd
}

func cassandraNodetool(ctx context.Context, stdio IO, o cassandraNodetoolOptions) error {
	c, err := o.Cluster.open(stdio)
	if err != nil {
		return err
	}
	out, err := c.Nodetool(ctx, o.Node-1, o.Args...)
	fmt.Fprint(stdio.Out, out)
	return err
}
