package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// cassandraUpOptions are `cassandra up`'s settings.
type cassandraUpOptions struct {
	Cluster  cassandraClusterOptions
	Nodes    int
	BaseAddr string
	HeapMB   int
}

func newCmdCassandraUp(stdio IO, cl *cassandraClusterOptions, runF func(context.Context, cassandraUpOptions) error) *cobra.Command {
	var o cassandraUpOptions
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local cluster (jars from Maven Central) and wait until every node sees the others",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Cluster = *cl
			if o.Nodes != 1 && o.Nodes != 3 {
				return fmt.Errorf("--nodes %d: want 1 or 3", o.Nodes)
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return cassandraUp(cmd.Context(), stdio, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Nodes, "nodes", 1, "number of nodes: 1 or 3")
	f.StringVar(&o.BaseAddr, "base-addr", launcher.UserAddr, "address of node 1; node N listens on the next addresses")
	f.IntVar(&o.HeapMB, "heap-mb", 512, "JVM heap per node, MiB")
	return cmd
}

func cassandraUp(ctx context.Context, stdio IO, o cassandraUpOptions) error {
	// The launcher refuses a directory holding a cluster of another size or on other addresses.
	c, err := launcher.New(launcher.Options{Dir: o.Cluster.Dir, Nodes: o.Nodes, BaseAddr: o.BaseAddr, HeapMB: o.HeapMB, Logger: cassandraLogger(stdio)})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	start := time.Now()
	if err := c.Up(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "cassandra %s: %d node(s) up in %s\n", launcher.DefaultVersion, o.Nodes, time.Since(start).Round(100*time.Millisecond))
	boot := c.BootTimes()
	for _, n := range c.Nodes() {
		if d, ok := boot[n.Index]; ok {
			fmt.Fprintf(stdio.Out, "  node%d %s:%d boot %s\n", n.Index+1, n.Addr, launcher.CQLPort, d.Round(100*time.Millisecond))
		}
	}
	fmt.Fprintf(stdio.Out, "contact points: %s (stop with: shardmart cassandra down)\n", strings.Join(c.Hosts(), ","))
	return nil
}
