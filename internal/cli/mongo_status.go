package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

// mongoStatusOptions are `mongo status`'s settings.
type mongoStatusOptions struct {
	Dir string
}

func newCmdMongoStatus(stdio IO, runF func(context.Context, mongoStatusOptions) error) *cobra.Command {
	return newCmdMongoDirVerb(stdio, "status",
		"Show each member of the local replica set: address, state, server version", mongoStatus, runF)
}

func mongoStatus(ctx context.Context, stdio IO, o mongoStatusOptions) error {
	if c, err := launcher.OpenCluster(o.Dir, nil); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		printClusterStatus(ctx, stdio, c)
		shards, err := c.RegisteredShards(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdio.Out, "registered shards: %s (no router)\n", strings.Join(shards, ", "))
		fmt.Fprintln(stdio.Out, c.ConfigURI())
		return nil
	} else if !errors.Is(err, launcher.ErrNoSet) {
		return err
	}
	s, err := launcher.Open(o.Dir, nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "SET %s\t\t\t\n", s.Name())
	fmt.Fprintln(tw, "MEMBER\tHOST\tSTATE\tVERSION")
	for _, st := range s.Status(ctx) {
		v := st.Version
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", st.Index, st.Host, st.State, v)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(stdio.Out, s.URI())
	return nil
}

// printClusterStatus prints every set of a cluster: config server first, then the shards.
func printClusterStatus(ctx context.Context, stdio IO, c *launcher.Cluster) {
	tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SET\tMEMBER\tHOST\tSTATE\tVERSION")
	for _, s := range c.Sets() {
		for _, st := range s.Status(ctx) {
			v := st.Version
			if v == "" {
				v = "-"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", s.Name(), st.Index, st.Host, st.State, v)
		}
	}
	_ = tw.Flush()
}
