// Package shardtest drives a sharded cluster that has no mongos (launcher.Cluster) from tests.
//
// mongos cannot be had here. It is a router: it turns each public admin command into an
// internal command for the config server primary or a shard primary, and sends every document
// to the shard that owns its chunk. Router does the same two jobs, in test code only:
// RunCommand sends the internal form of each public command the sharding package uses, one to
// one, so sharding.Apply, the zone commands, the firehose Roll, MoveRange and the balancer
// stop-and-wait run against the real config server and the real balancer; Place inserts
// documents on the shard that owns each one's chunk, as mongos would route them. Production
// code keeps sending the public commands to a mongos.
package shardtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/sharding"
)

// ErrNoInternalForm means the router does not know the internal form of a public command: a
// new command in the sharding package needs a line here before it can be tested live.
var ErrNoInternalForm = errors.New("shardtest: no internal form known for this command")

// Router stands in for mongos in front of a launcher.Cluster.
type Router struct {
	Config *mongo.Client            // the config server replica set
	Shards map[string]*mongo.Client // each shard replica set, by shard id

	// Seed seeds the draws of Aggregate's $sample merge; tests log it so a run can be
	// replayed (Reseed).
	Seed  uint64
	rngMu sync.Mutex
	rng   *rand.Rand

	routesMu    sync.Mutex
	routesCache map[string]CollectionInfo // VersionedWrite's routing tables, by namespace
}

// Reseed restarts the $sample merge's draws from seed.
func (r *Router) Reseed(seed uint64) {
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	r.Seed, r.rng = seed, rand.New(rand.NewPCG(seed, 0))
}

func (r *Router) int64N(n int64) int64 {
	r.rngMu.Lock()
	defer r.rngMu.Unlock()
	return r.rng.Int64N(n)
}

// Connect opens a client to the config server and to each shard of c.
func Connect(ctx context.Context, c *launcher.Cluster) (*Router, error) {
	r := &Router{Shards: map[string]*mongo.Client{}}
	r.Reseed(uint64(time.Now().UnixNano()))
	// The launcher's own client options: over TLS, and as a member when the cluster has a
	// keyFile, since the internal commands need the privileges a mongos has.
	open := func(uri string) (*mongo.Client, error) {
		o, err := c.Config.ClientOptions(uri)
		if err != nil {
			return nil, err
		}
		return mongo.Connect(o.SetServerSelectionTimeout(30 * time.Second))
	}
	var err error
	if r.Config, err = open(c.ConfigURI()); err != nil {
		return nil, fmt.Errorf("shardtest: connect to the config server: %w", err)
	}
	for _, s := range c.Shards {
		cl, err := open(s.URI())
		if err != nil {
			r.Close(ctx)
			return nil, fmt.Errorf("shardtest: connect to shard %s: %w", s.Name(), err)
		}
		r.Shards[s.Name()] = cl
	}
	return r, nil
}

// Close disconnects every client.
func (r *Router) Close(ctx context.Context) {
	for _, cl := range r.Shards {
		_ = cl.Disconnect(ctx)
	}
	if r.Config != nil {
		_ = r.Config.Disconnect(ctx)
	}
}

// ShardIDs lists the shard ids, sorted.
func (r *Router) ShardIDs() []string { return slices.Sorted(maps.Keys(r.Shards)) }

func majority() bson.E {
	return bson.E{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}
}

// RunCommand runs the internal form of a public command, where mongos would send it. Its
// reply is the server's reply, unchanged; a command without a known internal form is refused
// with ErrNoInternalForm rather than guessed.
func (r *Router) RunCommand(ctx context.Context, db string, cmd bson.D) (bson.Raw, error) {
	if len(cmd) == 0 {
		return nil, errors.New("shardtest: empty command")
	}
	name := cmd[0].Key
	arg := cmd[0].Value
	rest := cmd[1:]
	toConfig := func(internal bson.D) (bson.Raw, error) { return run(ctx, r.Config, "admin", internal) }
	switch name {
	case "buildInfo":
		return toConfig(cmd)
	case "hello":
		// mongos answers hello itself, with msg "isdbgrid": how a client tells it from a mongod.
		return bson.Marshal(bson.D{{Key: "isWritablePrimary", Value: true}, {Key: "msg", Value: "isdbgrid"}, {Key: "ok", Value: 1.0}})
	case "enableSharding":
		// mongos: clusterCreateDatabase → _configsvrCreateDatabase (primaryShard optional).
		internal := bson.D{{Key: "_configsvrCreateDatabase", Value: arg}}
		if v, ok := lookup(rest, "primaryShard"); ok {
			internal = append(internal, bson.E{Key: "primaryShardId", Value: v})
		}
		return toConfig(append(internal, bson.E{Key: "enableSharding", Value: true}, majority()))
	case "addShardToZone", "removeShardFromZone", "updateZoneKeyRange", "balancerStart", "balancerStatus":
		internal := append(bson.D{{Key: "_configsvr" + upperFirst(name), Value: arg}}, rest...)
		if name != "balancerStatus" && name != "balancerStart" { // both refuse a writeConcern
			internal = append(internal, majority())
		}
		return toConfig(internal)
	case "balancerStop":
		// _configsvrBalancerStop refuses a writeConcern (InvalidOptions); maxTimeMS passes through.
		return toConfig(append(bson.D{{Key: "_configsvrBalancerStop", Value: arg}}, rest...))
	case "moveRange":
		return toConfig(moveRangeInternal(arg, rest))
	case "shardCollection":
		return r.shardCollection(ctx, arg, rest)
	case "createIndexes", "listIndexes":
		coll, _ := arg.(string)
		return r.toCollectionShards(ctx, db, coll, cmd, name == "listIndexes")
	}
	return nil, fmt.Errorf("%w: %s on %s", ErrNoInternalForm, name, db)
}

// moveRangeInternal is _configsvrMoveRange: forceJumbo is an enum there (1 = manual force), and
// secondaryThrottle an options document.
func moveRangeInternal(ns any, rest bson.D) bson.D {
	internal := bson.D{{Key: "_configsvrMoveRange", Value: ns}}
	for _, e := range rest {
		switch e.Key {
		case "forceJumbo":
			force := int32(0)
			if b, _ := e.Value.(bool); b {
				force = 1
			}
			internal = append(internal, bson.E{Key: "forceJumbo", Value: force})
		case "secondaryThrottle":
			internal = append(internal, bson.E{Key: "secondaryThrottle", Value: bson.D{{Key: "secondaryThrottle", Value: e.Value}}})
		default:
			internal = append(internal, e)
		}
	}
	return append(internal, majority())
}

// shardCollection is _shardsvrCreateCollection on the database's primary shard, with the
// database version attached, as mongos sends it.
func (r *Router) shardCollection(ctx context.Context, nsArg any, rest bson.D) (bson.Raw, error) {
	ns, _ := nsArg.(string)
	db, coll, ok := strings.Cut(ns, ".")
	if !ok {
		return nil, fmt.Errorf("shardtest: shardCollection %q: want db.collection", ns)
	}
	dbInfo, err := r.database(ctx, db)
	if err != nil {
		return nil, err
	}
	internal := bson.D{{Key: "_shardsvrCreateCollection", Value: coll}}
	for _, e := range rest {
		switch e.Key {
		case "key":
			internal = append(internal, bson.E{Key: "shardKey", Value: e.Value})
		default: // unique, numInitialChunks, presplitHashedZones, collation
			internal = append(internal, e)
		}
	}
	internal = append(internal, bson.E{Key: "databaseVersion", Value: dbInfo.Version}, majority())
	return r.onShard(ctx, dbInfo.Primary, db, internal)
}

// toCollectionShards sends an index command where mongos would: an unsharded collection's
// database primary (with the database version), or every shard owning a chunk of a sharded one.
// listIndexes reads one of them only.
func (r *Router) toCollectionShards(ctx context.Context, db, coll string, cmd bson.D, one bool) (bson.Raw, error) {
	info, err := r.Collection(ctx, db+"."+coll)
	if err != nil {
		return nil, err
	}
	if !info.Sharded {
		dbInfo, err := r.database(ctx, db)
		if err != nil {
			return nil, err
		}
		return r.onShard(ctx, dbInfo.Primary, db, append(slices.Clone(cmd), bson.E{Key: "databaseVersion", Value: dbInfo.Version}))
	}
	owners := info.Owners()
	if one {
		owners = owners[:1]
	}
	var reply bson.Raw
	for _, sh := range owners {
		if reply, err = r.onShard(ctx, sh, db, cmd); err != nil {
			return nil, err
		}
	}
	return reply, nil
}

func (r *Router) onShard(ctx context.Context, shard, db string, cmd bson.D) (bson.Raw, error) {
	cl, ok := r.Shards[shard]
	if !ok {
		return nil, fmt.Errorf("shardtest: shard %q is not in this cluster", shard)
	}
	raw, err := run(ctx, cl, db, cmd)
	if err != nil {
		return nil, fmt.Errorf("on shard %s: %w", shard, err)
	}
	return raw, nil
}

func run(ctx context.Context, cl *mongo.Client, db string, cmd bson.D) (bson.Raw, error) {
	raw, err := cl.Database(db).RunCommand(ctx, cmd).Raw()
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", cmd[0].Key, db, err)
	}
	return raw, nil
}

// Find reads config.* from the config server, as mongos does; other databases have no
// single place to read from and are refused.
func (r *Router) Find(ctx context.Context, db, coll string, filter bson.D) ([]bson.Raw, error) {
	if db != "config" {
		return nil, fmt.Errorf("%w: find on %s.%s (only config.* is routed)", ErrNoInternalForm, db, coll)
	}
	cur, err := r.Config.Database(db).Collection(coll).Find(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("find %s.%s: %w", db, coll, err)
	}
	var out []bson.Raw
	for cur.Next(ctx) {
		out = append(out, slices.Clone(cur.Current))
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("find %s.%s: %w", db, coll, err)
	}
	return out, cur.Close(ctx)
}

// dbEntry is a config.databases document.
type dbEntry struct {
	Primary string   `bson:"primary"`
	Version bson.Raw `bson:"version"`
}

func (r *Router) database(ctx context.Context, db string) (dbEntry, error) {
	var d dbEntry
	err := r.Config.Database("config").Collection("databases").FindOne(ctx, bson.D{{Key: "_id", Value: db}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return d, fmt.Errorf("shardtest: database %q is not in config.databases (enableSharding first)", db)
	}
	if err != nil {
		return d, fmt.Errorf("shardtest: read config.databases %s: %w", db, err)
	}
	return d, nil
}

func lookup(d bson.D, key string) (any, bool) {
	for _, e := range d {
		if e.Key == key {
			return e.Value, true
		}
	}
	return nil, false
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// codeNamespaceNotFound is the server's error code for a missing collection.
const codeNamespaceNotFound = 26

func isNamespaceNotFound(err error) bool {
	var ce mongo.CommandError
	return errors.As(err, &ce) && ce.Code == codeNamespaceNotFound
}

// Shared is a cluster and its router for a whole test binary, started on first use (tests that
// do not need it cost nothing); Stop, from TestMain after m.Run, closes and kills it.
type Shared struct {
	Opts launcher.ClusterOptions

	once    sync.Once
	cluster *launcher.Cluster
	router  *Router
	stop    func()
	err     error
}

// Get returns the cluster and its router, starting them on first use. A missing python3/pip
// fails the test with the install hint; it never skips.
func (s *Shared) Get(t testing.TB) (*launcher.Cluster, *Router) {
	t.Helper()
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		s.cluster, s.stop, s.err = launcher.StartSharedCluster(ctx, s.Opts)
		if s.err == nil {
			s.router, s.err = Connect(ctx, s.cluster)
		}
	})
	if s.err != nil {
		if errors.Is(s.err, launcher.ErrPrerequisite) {
			t.Fatalf("MongoDB tests need python3 with pip: %v", s.err)
		}
		t.Fatal(s.err)
	}
	t.Logf("shardtest router: $sample merge seed %d", s.router.Seed)
	return s.cluster, s.router
}

// Stop closes the router and kills the cluster, if Get started them.
func (s *Shared) Stop() {
	if s.router != nil {
		s.router.Close(context.Background())
	}
	if s.stop != nil {
		s.stop()
	}
}

// ShardCollection shards ns on key as a user does through mongos: enableSharding for its
// database, then shardCollection with any extra options (e.g. presplitHashedZones).
func (r *Router) ShardCollection(ctx context.Context, ns string, key bson.D, extra ...bson.E) error {
	db, _, _ := strings.Cut(ns, ".")
	shard := append(bson.D{{Key: "shardCollection", Value: ns}, {Key: "key", Value: key}}, extra...)
	for _, cmd := range []bson.D{{{Key: "enableSharding", Value: db}}, shard} {
		if _, err := r.RunCommand(ctx, "admin", cmd); err != nil {
			return err
		}
	}
	return nil
}

// BalancerOff stops the balancer and waits for its round to end (`mongo balancer stop
// --wait`), so chunks stay where they are; the balancer is started again when the test ends.
func BalancerOff(ctx context.Context, t testing.TB, r *Router) {
	t.Helper()
	if _, err := sharding.StopBalancer(ctx, r, time.Minute, 250*time.Millisecond, io.Discard); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sharding.StartBalancer(context.Background(), r) })
}

// BalancerOn starts the balancer; it runs again after the test whatever the test did.
func BalancerOn(ctx context.Context, t testing.TB, r *Router) {
	t.Helper()
	if err := sharding.StartBalancer(ctx, r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sharding.StartBalancer(context.Background(), r) })
}
