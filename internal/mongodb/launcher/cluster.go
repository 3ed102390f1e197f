package launcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// ClusterOptions describe a local sharded cluster without a router: a config server replica
// set and Shards shard replica sets. mongos cannot be had here; the config server and the
// shards run the whole sharding machinery (metadata, zones, the balancer, range moves) when
// mongos's internal commands are sent to them directly, which test code does.
type ClusterOptions struct {
	Dir             string // cluster directory (one subdirectory per set); required
	Shards          int    // 1..8, default 2
	MembersPerShard int    // 1 or 3, default 1
	// ShardMembers, when set, is each shard's member count (1 or 3) in shard order, overriding
	// MembersPerShard: a fault test needs a 3-member shard to fail over, not every shard.
	ShardMembers []int
	// ElectionTimeout is every shard set's electionTimeoutMillis; zero keeps MongoDB's 10 s.
	ElectionTimeout time.Duration
	// BasePort: the config server listens from BasePort, shard i from BasePort+10*(i+1).
	BasePort int
	Addr     string // default 127.0.0.1
	// ChunkSizeMB, when set, is written to config.settings (MongoDB's default is 128).
	ChunkSizeMB int
	CacheGB     float64 // WiredTiger cache per member, default 0.25
	// Security is every set's: one keyFile and one CA for the whole cluster (made in Dir when
	// the user gives none), and the same admin user created in each set.
	Security      Security
	DieWithParent bool
	CacheDir      string
	BootTimeout   time.Duration
	Logger        *slog.Logger
}

// Cluster is a config server set and its shard sets.
type Cluster struct {
	Config *Set
	Shards []*Set
	opts   ClusterOptions
	keys   Keys // the security files the launcher makes for the cluster
}

// NewCluster lays the sets out; nothing starts.
func NewCluster(o ClusterOptions) (*Cluster, error) {
	if o.Dir == "" {
		return nil, errors.New("launcher: ClusterOptions.Dir is required")
	}
	if o.Shards == 0 {
		o.Shards = 2
		if len(o.ShardMembers) > 0 {
			o.Shards = len(o.ShardMembers)
		}
	}
	if o.Shards < 1 || o.Shards > 8 {
		return nil, fmt.Errorf("launcher: %d shards: want 1 to 8", o.Shards)
	}
	if o.MembersPerShard == 0 {
		o.MembersPerShard = 1
	}
	if len(o.ShardMembers) == 0 {
		o.ShardMembers = slices.Repeat([]int{o.MembersPerShard}, o.Shards)
	}
	if len(o.ShardMembers) != o.Shards {
		return nil, fmt.Errorf("launcher: %d shards but members given for %d", o.Shards, len(o.ShardMembers))
	}
	for _, n := range o.ShardMembers {
		if n != 1 && n != 3 {
			return nil, fmt.Errorf("launcher: %d members per shard: want 1 or 3", n)
		}
	}
	if o.BasePort == 0 {
		o.BasePort = UserPort
	}
	if err := o.Security.validate(); err != nil {
		return nil, err
	}
	keys := o.Security.fill(o.Dir)
	set := func(name string, role Role, port, members int, extra []string) (*Set, error) {
		var election time.Duration
		if role == RoleShard {
			election = o.ElectionTimeout
		}
		return New(Options{Dir: filepath.Join(o.Dir, name), Name: name, Members: members, Addr: o.Addr,
			BasePort: port, Role: role, CacheGB: o.CacheGB, ExtraArgs: extra, DieWithParent: o.DieWithParent, ElectionTimeout: election,
			CacheDir: o.CacheDir, BootTimeout: o.BootTimeout, Logger: o.Logger, Security: o.Security})
	}
	c := &Cluster{opts: o, keys: keys}
	var err error
	if c.Config, err = set("cfg", RoleConfig, o.BasePort, 1, nil); err != nil {
		return nil, err
	}
	for i := range o.Shards {
		// Without it a range moved back to a shard that recently gave it away waits up to 15
		// minutes for the old copy's deletion.
		s, err := set(fmt.Sprintf("sh%d", i), RoleShard, o.BasePort+10*(i+1), o.ShardMembers[i],
			[]string{"--setParameter", "orphanCleanupDelaySecs=0"})
		if err != nil {
			return nil, err
		}
		c.Shards = append(c.Shards, s)
	}
	return c, nil
}

func (c *Cluster) sets() []*Set { return append([]*Set{c.Config}, c.Shards...) }

// ConfigURI is the config server's connection string (the cluster has no router).
func (c *Cluster) ConfigURI() string { return c.Config.URI() }

// Up starts every set (in parallel), registers each shard with the config server unless it is
// already registered, and sets the chunk size.
func (c *Cluster) Up(ctx context.Context) error {
	// Before making keys: a cluster started without security gets no key files it would not use.
	for _, s := range c.sets() {
		if err := checkHeld(s.opts.Dir, s.state()); err != nil {
			return err
		}
	}
	if err := c.keys.make(c.Config.opts.Addr); err != nil {
		return err
	}
	// The first set to fail stops the others' waits: a cluster with a dead shard is not coming
	// up, and its error is the one worth reading.
	setsCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	errs := make(chan error, len(c.sets()))
	for _, s := range c.sets() {
		go func() {
			err := s.Up(setsCtx)
			if err != nil && !errors.Is(err, serverproc.ErrExited) { // an exit names its set
				err = fmt.Errorf("set %s: %w", s.Name(), err)
			}
			if err != nil {
				fail(err)
			}
			errs <- err
		}()
	}
	var all []error
	for range c.sets() {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	if len(all) > 0 {
		if ctx.Err() == nil { // a set failed first; the others' errors are its echo
			return fmt.Errorf("launcher: start cluster: %w", context.Cause(setsCtx))
		}
		return fmt.Errorf("launcher: start cluster: %w", errors.Join(all...))
	}
	type member struct {
		set *Set
		i   int
	}
	children := map[member]*serverproc.Child{}
	for _, s := range c.sets() {
		for i, p := range s.procs.Started() {
			children[member{s, i}] = p
		}
	}
	ctx, explain, stop := serverproc.FailOnExit(ctx, children, func(m member, p *serverproc.Child) error {
		return m.set.exitedAt(m.i, p)
	})
	defer stop()
	return explain(c.withConfig(ctx, func(admin *mongo.Database) error {
		have, err := c.registered(ctx, admin)
		if err != nil {
			return err
		}
		for _, s := range c.Shards {
			if have[s.Name()] {
				continue
			}
			cmd := bson.D{{Key: "_configsvrAddShard", Value: s.Name() + "/" + strings.Join(s.Hosts(), ",")},
				{Key: "name", Value: s.Name()}, {Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}}}
			if err := admin.RunCommand(ctx, cmd).Err(); err != nil {
				return fmt.Errorf("launcher: add shard %s: %w", s.Name(), err)
			}
		}
		if c.opts.ChunkSizeMB > 0 {
			_, err := admin.Client().Database("config").Collection("settings").UpdateOne(ctx,
				bson.D{{Key: "_id", Value: "chunksize"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "value", Value: c.opts.ChunkSizeMB}}}},
				options.UpdateOne().SetUpsert(true))
			if err != nil {
				return fmt.Errorf("launcher: set chunk size: %w", err)
			}
		}
		return nil
	}))
}

// registered reads config.shards: the shards the config server knows.
func (c *Cluster) registered(ctx context.Context, admin *mongo.Database) (map[string]bool, error) {
	cur, err := admin.Client().Database("config").Collection("shards").Find(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("launcher: read config.shards: %w", err)
	}
	var docs []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("launcher: read config.shards: %w", err)
	}
	have := map[string]bool{}
	for _, d := range docs {
		have[d.ID] = true
	}
	return have, nil
}

// RegisteredShards names the shards in config.shards, sorted.
func (c *Cluster) RegisteredShards(ctx context.Context) ([]string, error) {
	var names []string
	err := c.withConfig(ctx, func(admin *mongo.Database) error {
		have, err := c.registered(ctx, admin)
		for n := range have {
			names = append(names, n)
		}
		return err
	})
	slices.Sort(names)
	return names, err
}

func (c *Cluster) withConfig(ctx context.Context, fn func(admin *mongo.Database) error) error {
	o, err := c.Config.ClientOptions(c.ConfigURI())
	if err != nil {
		return err
	}
	client, err := mongo.Connect(o.SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		return fmt.Errorf("launcher: connect to the config server: %w", err)
	}
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	return fn(client.Database("admin"))
}

// CreateUser creates u in the sets u.In names: on the config server, where a mongos would keep
// it, and on each shard, where the monitors log in directly (a mongos's users do not exist
// there). A user needed only through a mongos gets no login on the shards.
func (c *Cluster) CreateUser(ctx context.Context, u User) error {
	in := u.In
	if in == 0 {
		in = ConfigServer | ShardSets
	}
	var sets []*Set
	if in&ConfigServer != 0 {
		sets = append(sets, c.Config)
	}
	if in&ShardSets != 0 {
		sets = append(sets, c.Shards...)
	}
	for _, s := range sets {
		if err := s.CreateUser(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// Down stops the shards, then the config server.
func (c *Cluster) Down(ctx context.Context) error {
	var all []error
	for _, s := range c.Shards {
		all = append(all, s.Down(ctx))
	}
	all = append(all, c.Config.Down(ctx))
	return errors.Join(all...)
}

// KillAll SIGKILLs every member of every set (throwaway test clusters).
func (c *Cluster) KillAll() {
	for _, s := range c.sets() {
		s.KillAll()
	}
}

// OpenCluster loads the cluster that Up wrote into dir (dir/cfg, dir/sh0, …), or ErrNoSet.
func OpenCluster(dir string, logger *slog.Logger) (*Cluster, error) {
	cfg, err := Open(filepath.Join(dir, "cfg"), logger)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Config: cfg, opts: ClusterOptions{Dir: dir, Logger: logger}}
	for i := 0; ; i++ {
		s, err := Open(filepath.Join(dir, fmt.Sprintf("sh%d", i)), logger)
		if errors.Is(err, ErrNoSet) {
			break
		}
		if err != nil {
			return nil, err
		}
		c.Shards = append(c.Shards, s)
	}
	c.opts.Shards = len(c.Shards)
	return c, nil
}

// Sets returns the config server set, then the shards.
func (c *Cluster) Sets() []*Set { return c.sets() }

// Running reports whether any member of any set is alive.
func (c *Cluster) Running() bool {
	for _, s := range c.sets() {
		for i := range s.Members() {
			if s.Running(i) {
				return true
			}
		}
	}
	return false
}
