package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/sharding"
	"github.com/shardmart/shardmart/internal/store/mongostore"
)

// mongoApplyOptions are `mongo apply`'s settings.
type mongoApplyOptions struct {
	Cluster mongoClusterOptions
	DryRun  bool
}

func newCmdMongoApply(stdio IO, cl *mongoClusterOptions, runF func(context.Context, mongoApplyOptions) error) *cobra.Command {
	var o mongoApplyOptions
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Idempotently create the database, zones, indexes and sharded collections of the spec",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Cluster = *cl
			return runOrRunF(cmd.Context(), stdio, o, mongoApply, runF)
		},
	}
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "read the cluster and print what would run, without running it")
	return cmd
}

func mongoApply(ctx context.Context, stdio IO, o mongoApplyOptions) error {
	spec, err := o.Cluster.spec(time.Now())
	if err != nil {
		return err
	}
	return o.Cluster.withMongo(ctx, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
		res, err := sharding.Apply(ctx, admin, spec, stdio.Out, o.DryRun)
		fmt.Fprintf(stdio.Out, "apply: %d run, %d already in place, %d drift\n", res.Ran, res.Skipped, len(res.Drift))
		if err != nil || o.DryRun {
			return err
		}
		// The repositories' own indexes too, also on collections that hold documents
		// (serve builds those only on empty collections, so a long build never blocks it).
		rep, err := mongostore.New(admin.Client, mongostore.Options{Database: spec.Database}).EnsureSchema(ctx, true)
		for _, c := range rep.Created {
			fmt.Fprintf(stdio.Out, "store schema: created %s\n", c)
		}
		for _, c := range rep.Conflicts {
			fmt.Fprintf(stdio.Out, "store schema: CONFLICT %s (left as it is: drop or rename it by hand)\n", c)
		}
		return err
	})
}
