package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// cassandraStatusOptions are `cassandra status`'s settings.
type cassandraStatusOptions struct {
	Cluster cassandraClusterOptions
}

func newCmdCassandraStatus(stdio IO, cl *cassandraClusterOptions, runF func(context.Context, cassandraStatusOptions) error) *cobra.Command {
	return newCmdCassandraClusterVerb(stdio, cl, "status",
		"Show each node's process and the ring as the first running node sees it", cassandraStatus, runF)
}

func cassandraStatus(ctx context.Context, stdio IO, o cassandraStatusOptions) error {
	c, err := o.Cluster.open(stdio)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tJMX\tPROCESS\tDIR")
	first := -1
	for _, n := range c.Nodes() {
		state := "stopped"
		if c.Running(n.Index) {
			state = "running"
			if first < 0 {
				first = n.Index
			}
		}
		fmt.Fprintf(tw, "node%d\t%s:%d\t%d\t%s\t%s\n", n.Index+1, n.Addr, launcher.CQLPort, n.JMXPort, state, n.Dir)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if first < 0 {
		return nil
	}
	out, err := c.Nodetool(ctx, first, "status")
	if err != nil {
		return err
	}
	fmt.Fprint(stdio.Out, "\n"+out)
	return nil
}
