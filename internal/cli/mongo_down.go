package cli

import (
	"context"
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
	return newCmdMongoDirVerb(stdio, "down",
		"Stop every mongod the directory holds: its replica set or cluster cleanly (secondaries first), then any other", mongoDown, runF)
}

// newCmdMongoDirVerb builds a verb whose only setting is the directory `mongo up` wrote (down,
// status): it runs run, or runF if not nil (tests).
func newCmdMongoDirVerb[O ~struct{ Dir string }](stdio IO, use, short string, run func(context.Context, IO, O) error, runF func(context.Context, O) error) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use: use, Short: short, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOrRunF(cmd.Context(), stdio, O{Dir: dir}, run, runF)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", defaultMongoDir, "set directory given to `mongo up`")
	return cmd
}

func mongoDown(ctx context.Context, stdio IO, o mongoDownOptions) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	done, err := launcher.DownDir(ctx, o.Dir, nil)
	for _, d := range done {
		fmt.Fprintf(stdio.Out, "%s (data kept in %s)\n", d, o.Dir)
	}
	if err != nil {
		return err
	}
	if len(done) == 0 {
		fmt.Fprintln(stdio.Out, "no replica set to stop")
	}
	return nil
}
