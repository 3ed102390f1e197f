package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

// mongoDownOptions are `mongo down`'s settings.
type mongoDownOptions struct {
	Dir string
}

func newCmdMongoDown(stdio IO, runF func(context.Context, mongoDownOptions) error) *cobra.Command {
	var o mongoDownOptions
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local replica set cleanly (secondaries first, then the primary)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return mongoDown(cmd.Context(), stdio, o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", defaultMongoDir, "set directory given to `mongo up`")
	return cmd
}

func mongoDown(ctx context.Context, stdio IO, o mongoDownOptions) error {
	if c, err := launcher.OpenCluster(o.Dir, nil); err == nil {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		if err := c.Down(ctx); err != nil {
			return err
		}
		fmt.Fprintf(stdio.Out, "sharded cluster stopped: config server and %d shard(s) (data kept in %s)\n", len(c.Shards), o.Dir)
		return nil
	} else if !errors.Is(err, launcher.ErrNoSet) {
		return err
	}
	s, err := launcher.Open(o.Dir, nil)
	if errors.Is(err, launcher.ErrNoSet) {
		fmt.Fprintln(stdio.Out, "no replica set to stop")
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := s.Down(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Out, "replica set %s stopped (data kept in %s)\n", s.Name(), s.Dir())
	return nil
}
