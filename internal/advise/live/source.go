// Package live reads a collection of a running MongoDB deployment (a mongos or a replica set)
// for the shard-key advisor: its current shard key, a bounded $sample of documents, its
// read/write mix from $collStats latencyStats and, when asked, a short database-profiler
// sample. It only reads (the profiler is switched on for the sample and back to its previous
// level), and every read is bounded in documents and time.
package live

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// Source is the deployment advise reads: in production a mongos or a replica set through
// the driver (Client); tests may put a router of their own in front of a sharded cluster.
type Source interface {
	RunCommand(ctx context.Context, db string, cmd bson.D) (bson.Raw, error)
	// Find returns db.coll's documents matching filter (Client reads at most findLimit).
	Find(ctx context.Context, db, coll string, filter bson.D) ([]bson.Raw, error)
	Aggregate(ctx context.Context, db, coll string, pipeline bson.A) ([]bson.Raw, error)
}

// Client is a Source over a driver client connected to a mongos or a replica set.
type Client struct{ C *mongo.Client }

// Connect opens a Client to uri; reads go to the primary whatever uri's readPreference says
// (the profiler and latencyStats are per member: the primary is the member taking the
// writes). Every operation is bounded by opTimeout, which the driver also sends as maxTimeMS, so a slow read stops on the server.
func Connect(ctx context.Context, uri string) (*Client, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(uri).SetReadPreference(readpref.Primary()).SetAppName("shardmart-advise").SetTimeout(opTimeout))
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := c.Ping(ctx, nil); err != nil {
		_ = c.Disconnect(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("connect: %w", err)
	}
	return &Client{C: c}, nil
}

// Close disconnects.
func (c *Client) Close(ctx context.Context) error { return c.C.Disconnect(ctx) }

// RunCommand runs cmd on db.
func (c *Client) RunCommand(ctx context.Context, db string, cmd bson.D) (bson.Raw, error) {
	raw, err := c.C.Database(db).RunCommand(ctx, cmd).Raw()
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", cmd[0].Key, db, err)
	}
	return raw, nil
}

// Find reads db.coll, at most findLimit documents.
func (c *Client) Find(ctx context.Context, db, coll string, filter bson.D) ([]bson.Raw, error) {
	cur, err := c.C.Database(db).Collection(coll).Find(ctx, filter, options.Find().SetLimit(findLimit))
	if err != nil {
		return nil, fmt.Errorf("find %s.%s: %w", db, coll, err)
	}
	return drain(ctx, cur, db+"."+coll)
}

// Aggregate runs pipeline on db.coll.
func (c *Client) Aggregate(ctx context.Context, db, coll string, pipeline bson.A) ([]bson.Raw, error) {
	cur, err := c.C.Database(db).Collection(coll).Aggregate(ctx, pipeline)
	if err != nil {
		return nil, fmt.Errorf("aggregate %s.%s: %w", db, coll, err)
	}
	return drain(ctx, cur, db+"."+coll)
}

// opTimeout bounds each command advise sends.
const opTimeout = time.Minute

// findLimit bounds every find advise sends (config metadata, profiler entries).
const findLimit = 10_000

// drain reads cur to its end, refusing to hold more than maxSampleBytes.
func drain(ctx context.Context, cur *mongo.Cursor, ns string) ([]bson.Raw, error) {
	defer cur.Close(context.WithoutCancel(ctx))
	var out []bson.Raw
	var size int
	for cur.Next(ctx) {
		if size += len(cur.Current); size > maxSampleBytes {
			return nil, &Refusal{Msg: fmt.Sprintf("read of %s stopped past %d MiB: lower --sample", ns, maxSampleBytes>>20)}
		}
		out = append(out, slices.Clone(cur.Current))
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", ns, err)
	}
	return out, nil
}

// Server error codes advise turns into one-line refusals.
const (
	codeUnauthorized      = 13
	codeNamespaceNotFound = 26
)

func hasCode(err error, code int) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(code)
}

// Refusal is advise declining to advise, with the one line that says why.
type Refusal struct{ Msg string }

func (r *Refusal) Error() string { return r.Msg }

// RolesNeeded are the built-in roles advise needs, for the refusal when one is missing.
const RolesNeeded = "read on the database (through a mongos also clusterMonitor, for config.collections, config.shards and config.settings); dbAdmin on the database for --profile-seconds"

// unauthorized turns a server's Unauthorized error into a Refusal naming the roles.
func unauthorized(err error, what string) error {
	if hasCode(err, codeUnauthorized) {
		return &Refusal{Msg: fmt.Sprintf("not allowed to %s: the user needs %s", what, RolesNeeded)}
	}
	return err
}
