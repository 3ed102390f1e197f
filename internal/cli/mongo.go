package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/shardmart/shardmart/internal/sharding"
	mongostore "github.com/shardmart/shardmart/internal/store/mongo"
)

// errNoMongoURI is returned by every command that needs a cluster.
var errNoMongoURI = errors.New("no MongoDB URI: pass --uri or set SHARDMART_MONGO_URI to a mongos, e.g. mongodb://localhost:27017 (see deploy/mongodb for a local sharded cluster)")

// newMongoCmd groups the MongoDB sharding administration commands.
func newMongoCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mongo",
		Short: "MongoDB: a local replica set (fetch, up, down, status); sharding (plan/apply, balancer, zones, move-range, firehose roll)",
		Long: `Sharding spec as code for a MongoDB sharded cluster (connect to a mongos).

plan prints the exact commands apply sends (as mongosh), so a DBA can review
them; apply is idempotent. Commands other than plan need --uri or
SHARDMART_MONGO_URI.`,
	}
	pf := cmd.PersistentFlags()
	pf.String("uri", "", "mongos connection string (env SHARDMART_MONGO_URI)")
	pf.String("db", sharding.DefaultDatabase, "database to shard")
	pf.Duration("timeout", 2*time.Minute, "time limit for the whole command (server selection: 15 s)")
	pf.StringArray("variant", nil, "shard-key variant per collection, collection=variant (repeatable; see `mongo plan --list-variants`)")
	pf.StringArray("tier", nil, "zone served by a shard, zone=shard (repeatable; default fast=shard1, standard=shard2)")
	cmd.AddCommand(
		newMongoPlanCmd(stdio),
		newMongoApplyCmd(stdio),
		newMongoBalancerCmd(stdio),
		newMongoZonesCmd(stdio),
		newMongoMoveRangeCmd(stdio),
		newMongoFirehoseCmd(stdio),
		newMongoFetchCmd(stdio),
		newMongoUpCmd(stdio, nil),
		newMongoDownCmd(stdio),
		newMongoStatusCmd(stdio),
	)
	return cmd
}

// mongoSpec builds the spec from the persistent flags.
func mongoSpec(cmd *cobra.Command, now time.Time) (sharding.Spec, error) {
	if err := bindEnv(cmd); err != nil {
		return sharding.Spec{}, err
	}
	f := cmd.Flags()
	db, _ := f.GetString("db")
	vs, _ := f.GetStringArray("variant")
	ts, _ := f.GetStringArray("tier")
	opts := sharding.Options{Database: db, Now: now}
	if len(vs) > 0 {
		opts.Variants = map[string]string{}
		for _, v := range vs {
			c, name, ok := strings.Cut(v, "=")
			if !ok || c == "" || name == "" {
				return sharding.Spec{}, fmt.Errorf("--variant %q: want collection=variant", v)
			}
			opts.Variants[c] = name
		}
	}
	if len(ts) > 0 {
		opts.Tiers = map[string][]string{}
		for _, t := range ts {
			z, shard, ok := strings.Cut(t, "=")
			if !ok || z == "" || shard == "" {
				return sharding.Spec{}, fmt.Errorf("--tier %q: want zone=shard", t)
			}
			opts.Tiers[z] = append(opts.Tiers[z], shard)
		}
	}
	return sharding.NewSpec(opts)
}

// mongoConnect opens a client to the mongos and returns the command context.
func mongoConnect(cmd *cobra.Command, extra time.Duration) (context.Context, sharding.DriverAdmin, func(), error) {
	if err := bindEnv(cmd); err != nil {
		return nil, sharding.DriverAdmin{}, nil, err
	}
	uri, _ := cmd.Flags().GetString("uri")
	if uri == "" {
		uri = os.Getenv("SHARDMART_MONGO_URI")
	}
	if uri == "" {
		return nil, sharding.DriverAdmin{}, nil, errNoMongoURI
	}
	timeout, _ := cmd.Flags().GetDuration("timeout")
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout+extra)
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(15 * time.Second))
	if err != nil {
		cancel()
		return nil, sharding.DriverAdmin{}, nil, fmt.Errorf("connect to MongoDB: %w", err)
	}
	cleanup := func() {
		_ = client.Disconnect(context.Background())
		cancel()
	}
	if err := client.Ping(ctx, readpref.Primary()); err != nil {
		cleanup()
		return nil, sharding.DriverAdmin{}, nil, fmt.Errorf("reach MongoDB at the given URI (is the mongos running? see deploy/mongodb): %w", err)
	}
	return ctx, sharding.DriverAdmin{Client: client}, cleanup, nil
}

// withMongo connects to the mongos, runs fn and disconnects.
func withMongo(cmd *cobra.Command, extra time.Duration, fn func(ctx context.Context, admin sharding.DriverAdmin) error) error {
	ctx, admin, done, err := mongoConnect(cmd, extra)
	if err != nil {
		return err
	}
	defer done()
	return fn(ctx, admin)
}

func newMongoPlanCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Print the mongosh commands apply would run on an empty cluster, and the shard-key rule findings",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list, _ := cmd.Flags().GetBool("list-variants"); list {
				tw := tabwriter.NewWriter(stdio.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "collection\tvariants (default first)")
				spec, err := sharding.NewSpec(sharding.Options{})
				if err != nil {
					return err
				}
				for _, c := range spec.Collections {
					fmt.Fprintf(tw, "%s\t%s\n", c.Name, strings.Join(sharding.Variants()[c.Name], ", "))
				}
				return tw.Flush()
			}
			day, _ := cmd.Flags().GetString("firehose-day")
			now := time.Now()
			if day != "" {
				t, err := time.Parse(time.DateOnly, day)
				if err != nil {
					return fmt.Errorf("--firehose-day %q: want YYYY-MM-DD: %w", day, err)
				}
				now = t
			}
			spec, err := mongoSpec(cmd, now)
			if err != nil {
				return err
			}
			for _, f := range sharding.Check(spec) {
				fmt.Fprintf(stdio.Out, "// %s\n", f)
			}
			if len(sharding.Check(spec)) > 0 {
				fmt.Fprintln(stdio.Out)
			}
			if err := sharding.WritePlan(stdio.Out, spec, sharding.Plan(spec)); err != nil {
				return err
			}
			if errs := sharding.Errors(sharding.Check(spec)); len(errs) > 0 {
				return fmt.Errorf("%w: %d error(s) above; apply would refuse", sharding.ErrRules, len(errs))
			}
			return nil
		},
	}
	cmd.Flags().String("firehose-day", "", "initial firehose boundary day, YYYY-MM-DD (default today, UTC)")
	cmd.Flags().Bool("list-variants", false, "list the selectable shard-key variants and exit")
	return cmd
}

func newMongoApplyCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apply",
		Short: "Idempotently create the database, zones, indexes and sharded collections of the spec",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := mongoSpec(cmd, time.Now())
			if err != nil {
				return err
			}
			return withMongo(cmd, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
				dry, _ := cmd.Flags().GetBool("dry-run")
				res, err := sharding.Apply(ctx, admin, spec, stdio.Out, dry)
				fmt.Fprintf(stdio.Out, "apply: %d run, %d already in place, %d drift\n", res.Ran, res.Skipped, len(res.Drift))
				if err != nil || dry {
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
		},
	}
	cmd.Flags().Bool("dry-run", false, "read the cluster and print what would run, without running it")
	return cmd
}

func newMongoBalancerCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{Use: "balancer", Short: "Balancer status, start, stop (stop waits for the running round)"}
	status := &cobra.Command{
		Use:   "status",
		Short: "Balancer mode and round, and auto-split per server version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withMongo(cmd, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
				st, err := sharding.GetBalancerStatus(ctx, admin)
				if err != nil {
					return err
				}
				as, err := sharding.GetAutoSplit(ctx, admin)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdio.Out, "balancer: %s\n", st)
				if as.NoOp {
					fmt.Fprintf(stdio.Out, "auto-split: no-op on %s (%s)\n", as.Version, as.Note)
				} else {
					fmt.Fprintf(stdio.Out, "auto-split: enabled=%t on %s (%s)\n", as.Enabled, as.Version, as.Note)
				}
				return nil
			})
		},
	}
	start := &cobra.Command{
		Use:   "start",
		Short: "Enable the balancer (balancerStart)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withMongo(cmd, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
				if err := sharding.RunLogged(ctx, admin, stdio.Out, sharding.BalancerStartCmd()); err != nil {
					return err
				}
				st, err := sharding.GetBalancerStatus(ctx, admin)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdio.Out, "balancer: %s\n", st)
				return nil
			})
		},
	}
	stop := &cobra.Command{
		Use:   "stop",
		Short: "Disable the balancer and wait until no balancing round (migration) is running",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			wait, _ := cmd.Flags().GetDuration("wait")
			poll, _ := cmd.Flags().GetDuration("poll")
			return withMongo(cmd, wait, func(ctx context.Context, admin sharding.DriverAdmin) error {
				fmt.Fprintln(stdio.Out, sharding.Shell("admin", sharding.BalancerStopCmd(wait)))
				_, err := sharding.StopBalancer(ctx, admin, wait, poll, stdio.Out)
				return err
			})
		},
	}
	stop.Flags().Duration("wait", 5*time.Minute, "how long to wait for a running round to finish")
	stop.Flags().Duration("poll", 2*time.Second, "balancerStatus polling interval")
	cmd.AddCommand(status, start, stop)
	return cmd
}

// collectionArg resolves a collection of the spec by name.
func collectionArg(spec sharding.Spec, name string) (sharding.Collection, error) {
	c, ok := spec.Collection(name)
	if !ok {
		return c, fmt.Errorf("collection %q is not in the sharding spec", name)
	}
	return c, nil
}

func newMongoZonesCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{Use: "zones", Short: "Zones: shards in zones (SHD-3/SHD-7) and zone ranges over the full shard key"}
	shardZone := func(use, short string, build func(shard, zone string) bson.D) *cobra.Command {
		return &cobra.Command{
			Use: use + " SHARD ZONE", Short: short, Args: cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				return withMongo(cmd, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
					return sharding.RunLogged(ctx, admin, stdio.Out, build(args[0], args[1]))
				})
			},
		}
	}
	addShard := shardZone("add-shard", "Add a shard to a zone (addShardToZone)", sharding.AddShardToZoneCmd)
	removeShard := shardZone("remove-shard", "Remove a shard from a zone (removeShardFromZone)", sharding.RemoveShardFromZoneCmd)

	rangeCmd := func(use, short string, remove bool) *cobra.Command {
		args := cobra.ExactArgs(2)
		usage := use + " COLLECTION ZONE"
		if remove {
			args = cobra.ExactArgs(1)
			usage = use + " COLLECTION"
		}
		c := &cobra.Command{
			Use: usage, Short: short, Args: args,
			RunE: func(cmd *cobra.Command, a []string) error {
				spec, err := mongoSpec(cmd, time.Now())
				if err != nil {
					return err
				}
				coll, err := collectionArg(spec, a[0])
				if err != nil {
					return err
				}
				minS, _ := cmd.Flags().GetString("min")
				maxS, _ := cmd.Flags().GetString("max")
				lo, err := sharding.ParseBound(minS)
				if err != nil {
					return err
				}
				hi, err := sharding.ParseBound(maxS)
				if err != nil {
					return err
				}
				zone := "-"
				if !remove {
					zone = a[1]
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
				if dry, _ := cmd.Flags().GetBool("dry-run"); dry {
					fmt.Fprintln(stdio.Out, sharding.Shell("admin", command))
					return nil
				}
				return withMongo(cmd, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
					return sharding.RunLogged(ctx, admin, stdio.Out, command)
				})
			},
		}
		c.Flags().String("min", "", `shard-key prefix as Extended JSON, padded with MinKey, e.g. '{"category":"books"}' (empty: MinKey)`)
		c.Flags().String("max", "", `shard-key prefix as Extended JSON, padded with MaxKey (empty: MaxKey)`)
		c.Flags().Bool("dry-run", false, "print the command instead of running it")
		return c
	}
	list := &cobra.Command{
		Use: "list", Short: "List zone ranges (config.tags) of the spec's collections", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := mongoSpec(cmd, time.Now())
			if err != nil {
				return err
			}
			return withMongo(cmd, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
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
		},
	}
	cmd.AddCommand(addShard, removeShard,
		rangeCmd("add-range", "Assign a shard-key range to a zone (updateZoneKeyRange, full key with MinKey/MaxKey)", false),
		rangeCmd("remove-range", "Remove a zone range; bounds must match the existing range exactly", true),
		list,
	)
	return cmd
}

func newMongoMoveRangeCmd(stdio IO) *cobra.Command {
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
			spec, err := mongoSpec(cmd, time.Now())
			if err != nil {
				return err
			}
			coll, err := collectionArg(spec, args[0])
			if err != nil {
				return err
			}
			f := cmd.Flags()
			to, _ := f.GetString("to")
			if to == "" {
				return errors.New("--to SHARD is required")
			}
			minS, _ := f.GetString("min")
			maxS, _ := f.GetString("max")
			lo, err := sharding.ParseBound(minS)
			if err != nil {
				return err
			}
			hi, err := sharding.ParseBound(maxS)
			if err != nil {
				return err
			}
			force, _ := f.GetBool("force")
			var o sharding.MoveRangeOptions
			o.ForceJumbo, _ = f.GetBool("force-jumbo")
			o.WaitForDelete, _ = f.GetBool("wait-for-delete")
			o.SecondaryThrottle, _ = f.GetBool("secondary-throttle")
			o.MaxChunks, _ = f.GetInt("max-chunks")
			if o.MaxChunks < 1 {
				return fmt.Errorf("--max-chunks %d: want at least 1", o.MaxChunks)
			}
			return withMongo(cmd, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
				return sharding.MoveRange(ctx, admin, spec.Namespace(coll.Name), coll, to, lo, hi, o, force, stdio.Out)
			})
		},
	}
	f := cmd.Flags()
	f.String("to", "", "recipient shard id (listShards)")
	f.String("min", "", `range start, shard-key prefix as Extended JSON padded with MinKey`)
	f.String("max", "", `range end, shard-key prefix padded with MaxKey (empty: the server picks by chunk size)`)
	f.Bool("force", false, "move even though the balancer is enabled")
	f.Bool("force-jumbo", false, "allow moving a range too large to migrate")
	f.Bool("wait-for-delete", false, "wait for the donor to delete the moved documents")
	f.Bool("secondary-throttle", false, "wait for secondaries during the migration")
	f.Int("max-chunks", sharding.DefaultMaxMoveChunks, "refuse a range over more chunks than this (use a zone instead)")
	return cmd
}

func newMongoFirehoseCmd(stdio IO) *cobra.Command {
	cmd := &cobra.Command{Use: "firehose", Short: "Firehose zone (SHD-4): pin new writes of an ascending key to the fast tier"}
	roll := &cobra.Command{
		Use:   "roll",
		Short: "Move the open-ended firehose range to today (idempotent; run daily, e.g. from cron)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := mongoSpec(cmd, time.Now())
			if err != nil {
				return err
			}
			name, _ := cmd.Flags().GetString("collection")
			coll, err := collectionArg(spec, name)
			if err != nil {
				return err
			}
			at := time.Now()
			if s, _ := cmd.Flags().GetString("at"); s != "" {
				if at, err = time.Parse(time.DateOnly, s); err != nil {
					return fmt.Errorf("--at %q: want YYYY-MM-DD: %w", s, err)
				}
			}
			return withMongo(cmd, 0, func(ctx context.Context, admin sharding.DriverAdmin) error {
				dry, _ := cmd.Flags().GetBool("dry-run")
				n, err := sharding.Roll(ctx, admin, spec, coll, at, dry, stdio.Out)
				if err == nil && n > 0 && !dry {
					fmt.Fprintf(stdio.Out, "firehose boundary of %s now %s\n", spec.Namespace(coll.Name), sharding.Day(at).Format(time.DateOnly))
				}
				return err
			})
		},
	}
	roll.Flags().String("collection", "events", "firehose collection")
	roll.Flags().String("at", "", "boundary day YYYY-MM-DD (default today, UTC)")
	roll.Flags().Bool("dry-run", false, "read config.tags and print the commands without running them")
	cmd.AddCommand(roll)
	return cmd
}
