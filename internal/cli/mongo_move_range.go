package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/sharding"
)

// mongoMoveRangeOptions are `mongo move-range`'s settings.
type mongoMoveRangeOptions struct {
	Cluster    mongoClusterOptions
	Collection string
	To         string
	Min, Max   string // shard-key prefixes as Extended JSON
	Force      bool
	Move       sharding.MoveRangeOptions
}

func newCmdMongoMoveRange(stdio IO, cl *mongoClusterOptions, runF func(context.Context, mongoMoveRangeOptions) error) *cobra.Command {
	var o mongoMoveRangeOptions
	cmd := &cobra.Command{
		Use:   "move-range COLLECTION",
		Short: "Move a shard-key range to a shard by hand, with the balancer stopped (SHD-5)",
		Long: `Runs moveRange (MongoDB 6.0+) or moveChunk on older servers. Refuses while the
balancer is enabled, since it would undo manual placement; stop it first with
` + "`shardmart mongo balancer stop`" + ` or pass --force.

moveRange moves one chunk or part of one: with --min and --max on 6.0+, the
chunks overlapping the range are read from config.chunks and each one not yet
on --to is moved by its own moveRange (clipped to the range), up to
--max-chunks chunks; a wider range belongs in a zone. Bounds on a hashed key
field are hash values, sent as NumberLong.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Cluster, o.Collection = *cl, args[0]
			if o.To == "" {
				return errors.New("--to SHARD is required")
			}
			if o.Move.MaxChunks < 1 {
				return fmt.Errorf("--max-chunks %d: want at least 1", o.Move.MaxChunks)
			}
			return runOrRunF(cmd.Context(), stdio, o, mongoMoveRange, runF)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.To, "to", "", "recipient shard id (listShards)")
	f.StringVar(&o.Min, "min", "", `range start, shard-key prefix as Extended JSON padded with MinKey`)
	f.StringVar(&o.Max, "max", "", `range end, shard-key prefix padded with MaxKey (empty: the server picks by chunk size)`)
	f.BoolVar(&o.Force, "force", false, "move even though the balancer is enabled")
	f.BoolVar(&o.Move.ForceJumbo, "force-jumbo", false, "allow moving a range too large to move (a jumbo chunk)")
	f.BoolVar(&o.Move.WaitForDelete, "wait-for-delete", false, "wait for the donor to delete the moved documents")
	f.BoolVar(&o.Move.SecondaryThrottle, "secondary-throttle", false, "wait for secondaries during the move")
	f.IntVar(&o.Move.MaxChunks, "max-chunks", sharding.DefaultMaxMoveChunks, "refuse a range over more chunks than this (use a zone instead)")
	return cmd
}

func mongoMoveRange(ctx context.Context, stdio IO, o mongoMoveRangeOptions) error {
	spec, coll, err := o.Cluster.collection(o.Collection)
	if err != nil {
		return err
	}
	lo, hi, err := parseBounds(o.Min, o.Max)
	if err != nil {
		return err
	}
	req := sharding.MoveRangeRequest{
		NS: spec.Namespace(coll.Name), Collection: coll, ToShard: o.To,
		Min: lo, Max: hi, Options: o.Move, Force: o.Force,
	}
	return o.Cluster.withMongo(ctx, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
		return sharding.MoveRange(ctx, admin, req, stdio.Out)
	})
}
