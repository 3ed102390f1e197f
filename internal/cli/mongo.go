package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/shardmart/shardmart/internal/mongodb/access"
	"github.com/shardmart/shardmart/internal/sharding"
)

// errNoMongoURI is returned by every command that needs a cluster.
var errNoMongoURI = errors.New("no MongoDB URI: pass --uri or set SHARDMART_MONGO_URI to a mongos, e.g. mongodb://localhost:27017 (see deploy/mongodb for a local sharded cluster)")

// mongoClusterOptions are the mongo group's persistent flags, which every sharding command
// shares: the verbs copy them into their own options once flags are parsed.
type mongoClusterOptions struct {
	URI      string
	Database string
	Timeout  time.Duration
	Variants []string // collection=variant
	Tiers    []string // zone=shard
}

// newCmdMongo groups the MongoDB commands: sharding administration and a local replica set.
func newCmdMongo(stdio IO) *cobra.Command {
	cl := &mongoClusterOptions{}
	return newMongoGroup(cl,
		newCmdMongoPlan(stdio, cl, nil),
		newCmdMongoApply(stdio, cl, nil),
		newCmdMongoBalancer(stdio, cl, nil),
		newCmdMongoZones(stdio, cl, nil),
		newCmdMongoMoveRange(stdio, cl, nil),
		newCmdMongoFirehose(stdio, cl, nil),
		newCmdMongoFetch(stdio),
		newCmdMongoUp(stdio, nil),
		newCmdMongoDown(stdio, nil),
		newCmdMongoStatus(stdio, nil),
		newCmdMongoUsers(stdio, nil),
	)
}

// newMongoGroup binds the group's persistent flags to cl and adds the verbs built on it.
func newMongoGroup(cl *mongoClusterOptions, verbs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mongo",
		Short: "MongoDB: a local replica set (fetch, up, down, status); sharding (plan/apply, balancer, zones, move-range, firehose roll)",
		Long: `Sharding spec as code for a MongoDB sharded cluster (connect to a mongos).

plan prints the exact commands apply sends (as mongosh), so a DBA can review
them; apply is idempotent. Commands other than plan need --uri or
SHARDMART_MONGO_URI.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&cl.URI, "uri", "", "mongos connection string")
	pf.StringVar(&cl.Database, "db", sharding.DefaultDatabase, "database to shard")
	pf.DurationVar(&cl.Timeout, "timeout", 2*time.Minute, "time limit for the whole command (server selection: 15 s)")
	pf.StringArrayVar(&cl.Variants, "variant", nil, "shard-key variant per collection, collection=variant (repeatable; see `mongo plan --list-variants`)")
	pf.StringArrayVar(&cl.Tiers, "tier", nil, "zone served by a shard, zone=shard (repeatable; default fast=shard1, standard=shard2)")
	// The same deployment settings as serve's --mongo-uri and --mongo-db.
	fromEnv(pf, "uri", "SHARDMART_MONGO_URI")
	fromEnv(pf, "db", "SHARDMART_MONGO_DB")
	cmd.AddCommand(verbs...)
	return cmd
}

// spec builds the sharding spec from the flags, with now as the firehose boundary day.
func (cl mongoClusterOptions) spec(now time.Time) (sharding.Spec, error) {
	opts := sharding.Options{Database: cl.Database, Now: now}
	if len(cl.Variants) > 0 {
		opts.Variants = map[string]string{}
		for _, v := range cl.Variants {
			c, name, ok := strings.Cut(v, "=")
			if !ok || c == "" || name == "" {
				return sharding.Spec{}, fmt.Errorf("--variant %q: want collection=variant", v)
			}
			opts.Variants[c] = name
		}
	}
	if len(cl.Tiers) > 0 {
		opts.Tiers = map[string][]string{}
		for _, t := range cl.Tiers {
			z, shard, ok := strings.Cut(t, "=")
			if !ok || z == "" || shard == "" {
				return sharding.Spec{}, fmt.Errorf("--tier %q: want zone=shard", t)
			}
			opts.Tiers[z] = append(opts.Tiers[z], shard)
		}
	}
	return sharding.NewSpec(opts)
}

// collection builds the spec and resolves one of its collections by name.
func (cl mongoClusterOptions) collection(name string) (sharding.Spec, sharding.Collection, error) {
	spec, err := cl.spec(time.Now())
	if err != nil {
		return spec, sharding.Collection{}, err
	}
	c, ok := spec.Collection(name)
	if !ok {
		return spec, c, fmt.Errorf("collection %q is not in the sharding spec", name)
	}
	return spec, c, nil
}

// withMongo connects to the mongos, runs fn within --timeout plus extra, and disconnects.
func (cl mongoClusterOptions) withMongo(ctx context.Context, extra time.Duration, fn func(ctx context.Context, admin sharding.DriverAdmin) error) error {
	if cl.URI == "" {
		return errNoMongoURI
	}
	ctx, cancel := context.WithTimeout(ctx, cl.Timeout+extra)
	defer cancel()
	client, err := mongo.Connect(options.Client().ApplyURI(cl.URI).SetServerSelectionTimeout(15 * time.Second))
	if err != nil {
		return fmt.Errorf("connect to MongoDB: %w", err)
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	if err := client.Ping(ctx, readpref.Primary()); err != nil {
		if refused, ok := access.Refusal(err); ok {
			return refused
		}
		return fmt.Errorf("reach MongoDB at the given URI (is the mongos running? see deploy/mongodb): %w", err)
	}
	return fn(ctx, sharding.DriverAdmin{Client: client})
}

// parseBounds parses --min and --max (shard-key prefixes as Extended JSON; empty: none).
func parseBounds(minS, maxS string) (lo, hi bson.D, err error) {
	if lo, err = sharding.ParseBound(minS); err != nil {
		return nil, nil, err
	}
	if hi, err = sharding.ParseBound(maxS); err != nil {
		return nil, nil, err
	}
	return lo, hi, nil
}
