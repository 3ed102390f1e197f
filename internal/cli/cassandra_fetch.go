package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

func newCmdCassandraFetch(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "fetch",
		Short: "Check Java 17 and Maven and download the Cassandra server jars into the cache",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Minute)
			defer cancel()
			if err := launcher.CheckPrerequisites(ctx); err != nil {
				return err
			}
			lib, err := launcher.EnsureJars(ctx, launcher.DefaultCacheDir(), launcher.DefaultVersion)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdio.Out, "cassandra %s jars in %s\n", launcher.DefaultVersion, lib)
			return nil
		},
	}
}
