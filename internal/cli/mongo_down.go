package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

func newMongoDownCmd(stdio IO) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local replica set cleanly (secondaries first, then the primary)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := launcher.Open(dir, nil)
			if errors.Is(err, launcher.ErrNoSet) {
				fmt.Fprintln(stdio.Out, "no replica set to stop")
				return nil
			}
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Minute)
			defer cancel()
			if err := s.Down(ctx); err != nil {
				return err
			}
			fmt.Fprintf(stdio.Out, "replica set %s stopped (data kept in %s)\n", s.Name(), s.Dir())
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", defaultMongoDir, "set directory given to `mongo up`")
	return cmd
}
