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
		Short: "Check Java 17 and Maven, download the Cassandra server jars into the cache and make the class-data sharing archive",
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
			// Boots a training node once per machine; every later node start and nodetool run
			// maps the archive. Without it they only start slower, so a failure is no error.
			server, _, err := launcher.EnsureCDS(ctx, launcher.DefaultCacheDir(), launcher.DefaultVersion, true, cassandraLogger(stdio))
			if err != nil {
				fmt.Fprintf(stdio.Out, "class-data sharing archive not made (nodes start slower): %v\n", err)
				return nil
			}
			fmt.Fprintf(stdio.Out, "class-data sharing archive %s\n", server)
			return nil
		},
	}
}
