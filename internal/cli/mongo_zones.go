package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/sharding"
)

// mongoZonesOptions are the settings of `mongo zones add-shard|remove-shard|add-range|remove-range|list`.
type mongoZonesOptions struct {
	Cluster mongoClusterOptions
	Action  string
	// Args are the positional arguments: SHARD ZONE (add-shard, remove-shard),
	// COLLECTION ZONE (add-range), COLLECTION (remove-range).
	Args     []string
	Min, Max string // add-range, remove-range: shard-key prefixes as Extended JSON
	DryRun   bool   // add-range, remove-range: print the command instead
}

func newCmdMongoZones(stdio IO, cl *mongoClusterOptions, runF func(context.Context, mongoZonesOptions) error) *cobra.Command {
	var o mongoZonesOptions
	cmd := &cobra.Command{Use: "zones", Short: "Zones: shards in zones (SHD-3/SHD-7) and zone ranges over the full shard key"}
	action := func(name, usage, short string, args cobra.PositionalArgs) *cobra.Command {
		return &cobra.Command{
			Use: name + usage, Short: short, Args: args,
			RunE: func(cmd *cobra.Command, a []string) error {
				o.Cluster, o.Action, o.Args = *cl, name, a
				return runOrRunF(cmd.Context(), stdio, o, mongoZones, runF)
			},
		}
	}
	rangeFlags := func(c *cobra.Command) *cobra.Command {
		c.Flags().StringVar(&o.Min, "min", "", `shard-key prefix as Extended JSON, padded with MinKey, e.g. '{"category":"books"}' (empty: MinKey)`)
		c.Flags().StringVar(&o.Max, "max", "", `shard-key prefix as Extended JSON, padded with MaxKey (empty: MaxKey)`)
		c.Flags().BoolVar(&o.DryRun, "dry-run", false, "print the command instead of running it")
		return c
	}
	cmd.AddCommand(
		action("add-shard", " SHARD ZONE", "Add a shard to a zone (addShardToZone)", cobra.ExactArgs(2)),
		action("remove-shard", " SHARD ZONE", "Remove a shard from a zone (removeShardFromZone)", cobra.ExactArgs(2)),
		rangeFlags(action("add-range", " COLLECTION ZONE", "Assign a shard-key range to a zone (updateZoneKeyRange, full key with MinKey/MaxKey)", cobra.ExactArgs(2))),
		rangeFlags(action("remove-range", " COLLECTION", "Remove a zone range; bounds must match the existing range exactly", cobra.ExactArgs(1))),
		action("list", "", "List zone ranges (config.tags) of the spec's collections", cobra.NoArgs),
	)
	return cmd
}

func mongoZones(ctx context.Context, stdio IO, o mongoZonesOptions) error {
	switch o.Action {
	case "add-shard":
		return mongoRun(ctx, stdio, o.Cluster, sharding.AddShardToZoneCmd(o.Args[0], o.Args[1]))
	case "remove-shard":
		return mongoRun(ctx, stdio, o.Cluster, sharding.RemoveShardFromZoneCmd(o.Args[0], o.Args[1]))
	case "list":
		return mongoZonesList(ctx, stdio, o.Cluster)
	}
	remove := o.Action == "remove-range"
	spec, coll, err := o.Cluster.collection(o.Args[0])
	if err != nil {
		return err
	}
	lo, hi, err := parseBounds(o.Min, o.Max)
	if err != nil {
		return err
	}
	zone := "-"
	if !remove {
		zone = o.Args[1]
	}
	r, err := sharding.ZoneRangeFor(coll, lo, hi, zone)
	if err != nil {
		return err
	}
	ns := spec.Namespace(coll.Name)
	command := sharding.UpdateZoneKeyRangeCmd(ns, r)
	if remove {
		command = sharding.RemoveZoneKeyRangeCmd(ns, r.Min, r.Max)
	}
	if o.DryRun {
		fmt.Fprintln(stdio.Out, sharding.Shell("admin", command))
		return nil
	}
	return mongoRun(ctx, stdio, o.Cluster, command)
}

// mongoRun sends one admin command to the mongos, printing it as mongosh first.
func mongoRun(ctx context.Context, stdio IO, cl mongoClusterOptions, command bson.D) error {
	return cl.withMongo(ctx, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
		return sharding.RunLogged(ctx, admin, stdio.Out, command)
	})
}

func mongoZonesList(ctx context.Context, stdio IO, cl mongoClusterOptions) error {
	spec, err := cl.spec(time.Now())
	if err != nil {
		return err
	}
	return cl.withMongo(ctx, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
		tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "namespace\tzone\tmin\tmax")
		for _, c := range spec.Collections {
			rs, err := sharding.ListZoneRanges(ctx, admin, spec.Namespace(c.Name))
			if err != nil {
				return err
			}
			for _, r := range rs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.NS, r.Tag, sharding.ShellValue(r.Min), sharding.ShellValue(r.Max))
			}
		}
		return tw.Flush()
	})
}
