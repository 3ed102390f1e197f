package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/sharding"
)

// mongoFirehoseRollOptions are `mongo firehose roll`'s settings.
type mongoFirehoseRollOptions struct {
	Cluster    mongoClusterOptions
	Collection string
	At         string // YYYY-MM-DD; empty: today
	DryRun     bool
}

func newCmdMongoFirehose(stdio IO, cl *mongoClusterOptions, runF func(context.Context, mongoFirehoseRollOptions) error) *cobra.Command {
	var o mongoFirehoseRollOptions
	cmd := &cobra.Command{Use: "firehose", Short: "Firehose zone (SHD-4): pin new writes of an ascending key to the fast tier"}
	roll := &cobra.Command{
		Use:   "roll",
		Short: "Move the open-ended firehose range to today (idempotent; run daily, e.g. from cron)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Cluster = *cl
			return runOrRunF(cmd.Context(), stdio, o, mongoFirehoseRoll, runF)
		},
	}
	f := roll.Flags()
	f.StringVar(&o.Collection, "collection", "events", "firehose collection")
	f.StringVar(&o.At, "at", "", "boundary day YYYY-MM-DD (default today, UTC)")
	f.BoolVar(&o.DryRun, "dry-run", false, "read config.tags and print the commands without running them")
	cmd.AddCommand(roll)
	return cmd
}

func mongoFirehoseRoll(ctx context.Context, stdio IO, o mongoFirehoseRollOptions) error {
	spec, coll, err := o.Cluster.collection(o.Collection)
	if err != nil {
		return err
	}
	at := time.Now()
	if o.At != "" {
		if at, err = time.Parse(time.DateOnly, o.At); err != nil {
			return fmt.Errorf("--at %q: want YYYY-MM-DD: %w", o.At, err)
		}
	}
	return o.Cluster.withMongo(ctx, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
		n, err := sharding.Roll(ctx, admin, spec, coll, at, o.DryRun, stdio.Out)
		if err == nil && n > 0 && !o.DryRun {
			fmt.Fprintf(stdio.Out, "firehose boundary of %s now %s\n", spec.Namespace(coll.Name), sharding.Day(at).Format(time.DateOnly))
		}
		return err
	})
}
