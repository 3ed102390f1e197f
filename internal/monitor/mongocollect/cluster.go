// Package mongocollect holds the MongoDB collectors of the hot-shard monitor, one per file
// (node_exporter style), and the connections they share: given the URI of a mongos or a
// config server, the shards are read from config.shards and each shard primary is queried
// directly, with the URI's credentials and TLS settings. docs/monitor.md is the contract.
package mongocollect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/shardmart/shardmart/internal/mongodb/access"
	"github.com/shardmart/shardmart/internal/monitor"
)

// ErrNotClusterEntry means the URI names neither a mongos nor a config server (a shard or a
// plain replica set has no config.shards to discover from).
var ErrNotClusterEntry = errors.New("mongocollect: the URI is neither a mongos nor a config server")

// Options configure the MongoDB collectors.
type Options struct {
	URI             string        // a mongos or a config server
	ChunkMoveWindow time.Duration // how far back config.changelog is read (default 1h)
	Logger          *slog.Logger
}

// Cluster is the connection to the cluster entry (mongos or config server) and to each shard
// primary, kept open between scrapes: the driver re-dials members that went away by itself,
// and a shard whose host string changes in config.shards gets a new client.
type Cluster struct {
	opts   Options
	base   *options.ClientOptions // the parsed URI: credentials and TLS, reused for the shards
	config *mongo.Client

	mu      sync.Mutex
	shards  map[string]*shardConn // by shard id
	pending *pendingView          // this scrape's discovery
}

type shardConn struct {
	host   string // as in config.shards, e.g. sh0/127.0.0.1:27410
	client *mongo.Client
}

// Open checks the URI and prepares the clients; nothing is dialled until the first scrape,
// so the exporter starts while the cluster is down.
func Open(o Options) (*Cluster, error) {
	if o.URI == "" {
		return nil, errors.New("mongocollect: no URI")
	}
	if o.ChunkMoveWindow <= 0 {
		o.ChunkMoveWindow = time.Hour
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	base := options.Client().ApplyURI(o.URI)
	if err := base.Validate(); err != nil {
		return nil, fmt.Errorf("mongocollect: --mongo-uri: %w", err)
	}
	cfg, err := mongo.Connect(options.Client().ApplyURI(o.URI).SetAppName("shardmart-monitor"))
	if err != nil {
		return nil, fmt.Errorf("mongocollect: connect to %s: %w", redact(o.URI), err)
	}
	return &Cluster{opts: o, base: base, config: cfg, shards: map[string]*shardConn{}}, nil
}

// Close disconnects every client.
func (c *Cluster) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := []error{c.config.Disconnect(ctx)}
	for _, s := range c.shards {
		errs = append(errs, s.client.Disconnect(ctx))
	}
	return errors.Join(errs...)
}

// Collectors returns one collector per source, all sharing this cluster's connections.
func (c *Cluster) Collectors() []monitor.Collector {
	cs := []monitor.Collector{
		viewed{c, shardsCollector{c}}, viewed{c, chunksCollector{c}}, viewed{c, collStatsCollector{c}},
		viewed{c, currentOpCollector{c}}, viewed{c, serverStatusCollector{c}}, viewed{c, balancerCollector{c}},
		chunkMovesCollector{c}, viewed{c, membersCollector{c}}, viewed{c, replicationCollector{c}},
	}
	for i, col := range cs {
		cs[i] = explained{col}
	}
	return cs
}

// viewCollector is a collector that works from this scrape's view of the cluster.
type viewCollector interface {
	Name() string
	updateView(ctx context.Context, v *view, ch chan<- prometheus.Metric) error
}

// viewed runs a viewCollector on the view the scrape's collectors share (discovered once per
// scrape).
type viewed struct {
	c *Cluster
	viewCollector
}

func (w viewed) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	v, err := w.c.view(ctx)
	if err != nil {
		return err
	}
	return w.updateView(ctx, v, ch)
}

// explained reports a refusal (a wrong password, a role the monitor's user lacks, an untrusted
// certificate) as one line naming what is missing, instead of the driver's nested error.
type explained struct{ monitor.Collector }

func (e explained) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	return access.Explain(e.Collector.Update(ctx, ch))
}

// shard is one shard as this scrape sees it.
type shard struct {
	id     string
	client *mongo.Client
	up     bool // its primary answered ping in this scrape
}

// view is what one discovery found: the entry's kind, the shards (sorted by id) and the
// sharded collections by uuid.
type view struct {
	mongos      bool
	shards      []shard
	collections map[string]string // string(uuid bytes) → namespace
}

// namespaces lists the sharded collections, sorted.
func (v *view) namespaces() []string {
	out := make([]string, 0, len(v.collections))
	for _, ns := range v.collections {
		out = append(out, ns)
	}
	slices.Sort(out)
	return out
}

type pendingView struct {
	id   uint64
	done chan struct{}
	v    *view
	err  error
}

// view returns this scrape's discovery, running it once per scrape (monitor.ScrapeID) however
// many collectors ask; outside a scrape every call discovers afresh.
func (c *Cluster) view(ctx context.Context) (*view, error) {
	id := monitor.ScrapeID(ctx)
	if id == 0 {
		return c.discover(ctx)
	}
	c.mu.Lock()
	p := c.pending
	if p == nil || p.id != id {
		p = &pendingView{id: id, done: make(chan struct{})}
		c.pending = p
		c.mu.Unlock()
		p.v, p.err = c.discover(ctx)
		close(p.done)
		return p.v, p.err
	}
	c.mu.Unlock()
	<-p.done // discover ends by ctx's deadline at the latest
	return p.v, p.err
}

// discover reads the entry's kind, config.shards and config.collections, and pings each shard
// primary. Only the entry failing is an error; a shard that does not answer is down.
func (c *Cluster) discover(ctx context.Context) (*view, error) {
	var hello struct {
		Msg       string        `bson:"msg"`
		ConfigSvr bson.RawValue `bson:"configsvr"`
	}
	if err := c.config.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return nil, fmt.Errorf("mongocollect: hello on %s: %w", redact(c.opts.URI), err)
	}
	v := &view{mongos: hello.Msg == "isdbgrid", collections: map[string]string{}}
	if !v.mongos && hello.ConfigSvr.IsZero() {
		return nil, ErrNotClusterEntry
	}
	cfg := c.config.Database("config")
	var entries []struct {
		ID   string `bson:"_id"`
		Host string `bson:"host"`
	}
	if err := findAll(ctx, cfg.Collection("shards"), bson.D{}, &entries); err != nil {
		return nil, err
	}
	var colls []struct {
		ID           string        `bson:"_id"`
		UUID         bson.RawValue `bson:"uuid"`
		Dropped      bool          `bson:"dropped"`
		Unsplittable bool          `bson:"unsplittable"` // 8.0: tracked but unsharded
	}
	if err := findAll(ctx, cfg.Collection("collections"), bson.D{}, &colls); err != nil {
		return nil, err
	}
	for _, cl := range colls {
		if cl.Dropped || cl.Unsplittable {
			continue
		}
		_, data, _ := cl.UUID.BinaryOK()
		v.collections[string(data)] = cl.ID
	}
	slices.SortFunc(entries, func(a, b struct {
		ID   string `bson:"_id"`
		Host string `bson:"host"`
	}) int {
		return strings.Compare(a.ID, b.ID)
	})
	v.shards = make([]shard, len(entries))
	// Half of what is left for the pings, so a dead shard cannot eat the whole scrape.
	pingCtx, cancel := context.WithTimeout(ctx, remaining(ctx)/2)
	defer cancel()
	var wg sync.WaitGroup
	pingErrs := make([]error, len(entries))
	for i, e := range entries {
		cl, err := c.shardClient(ctx, e.ID, e.Host)
		if err != nil {
			return nil, err
		}
		v.shards[i] = shard{id: e.ID, client: cl}
		wg.Go(func() {
			err := cl.Database("admin").RunCommand(pingCtx, bson.D{{Key: "ping", Value: 1}}).Err()
			v.shards[i].up, pingErrs[i] = err == nil, err
			if err != nil {
				c.opts.Logger.Debug("shard primary did not answer", "shard", e.ID, "err", err)
			}
		})
	}
	wg.Wait()
	// A shard that refuses the monitor's login is not down: the login is wrong, and every
	// collector says so. A connection closed at the handshake may be a shard going down: up 0.
	for i, err := range pingErrs {
		if refused, ok := access.Refusal(err); ok && refused.Certain() {
			return nil, fmt.Errorf("shard %s: %w", v.shards[i].id, refused)
		}
	}
	return v, nil
}

// remaining is the time left before ctx's deadline (a minute when it has none).
func remaining(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return time.Minute
}

// shardClient returns the open client to a shard, replacing it when config.shards names
// other hosts than when it was opened.
func (c *Cluster) shardClient(ctx context.Context, id, host string) (*mongo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.shards[id]; ok {
		if s.host == host {
			return s.client, nil
		}
		go func() { _ = s.client.Disconnect(context.WithoutCancel(ctx)) }()
		delete(c.shards, id)
	}
	cl, err := mongo.Connect(c.shardOptions(host))
	if err != nil {
		return nil, fmt.Errorf("mongocollect: connect to shard %s (%s): %w", id, host, err)
	}
	c.shards[id] = &shardConn{host: host, client: cl}
	return cl, nil
}

// shardOptions builds a replica-set connection to the shard in host ("rs/h1:p,h2:p", or
// "h:p" for a shard that is not a replica set) with the URI's credentials and TLS.
func (c *Cluster) shardOptions(host string) *options.ClientOptions {
	o := options.Client().SetAppName("shardmart-monitor")
	if rs, hosts, ok := strings.Cut(host, "/"); ok {
		o.SetReplicaSet(rs).SetHosts(strings.Split(hosts, ","))
	} else {
		o.SetHosts(strings.Split(host, ",")).SetDirect(true)
	}
	if c.base.Auth != nil {
		o.SetAuth(*c.base.Auth)
	}
	if c.base.TLSConfig != nil {
		o.SetTLSConfig(c.base.TLSConfig)
	}
	return o
}

// onUpShards runs fn on each shard that answered this scrape's ping, concurrently. A shard
// that went down since is skipped like one that was down already (shard_up says which);
// other errors are joined, naming the shard. A shard cut by its budget is logged, so a slow
// shard can be told from one the scrape could not reach.
func onUpShards(ctx context.Context, logger *slog.Logger, v *view, fn func(ctx context.Context, s shard) error) error {
	errs := make([]error, len(v.shards))
	var wg sync.WaitGroup
	for i, s := range v.shards {
		if !s.up {
			continue
		}
		wg.Go(func() {
			// A primary cut off or frozen after the ping answers nothing, not an error: its
			// queries would hang until the scrape's deadline and fail the collector. They get
			// half of what is left, and running out of it while the scrape still has time is
			// the shard going down, as a network error is.
			budget := remaining(ctx) / 2
			sctx, cancel := context.WithTimeout(ctx, budget)
			defer cancel()
			err := fn(sctx, s)
			if sctx.Err() != nil && ctx.Err() == nil {
				logger.Warn("shard did not answer within its half of the scrape budget; its series are left out",
					"shard", s.id, "budget", budget, "err", err)
				return
			}
			if err != nil && !isDown(ctx, err) {
				errs[i] = fmt.Errorf("shard %s: %w", s.id, access.Explain(err))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// isDown tells a shard that stopped answering (network error, no primary to select) while the
// scrape still had time from a failure of the collector.
func isDown(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var sel topology.ServerSelectionError
	return mongo.IsNetworkError(err) || errors.As(err, &sel)
}

func findAll(ctx context.Context, coll *mongo.Collection, filter bson.D, out any) error {
	cur, err := coll.Find(ctx, filter)
	if err == nil {
		err = cur.All(ctx, out)
	}
	if err != nil {
		return fmt.Errorf("mongocollect: read %s: %w", coll.Database().Name()+"."+coll.Name(), err)
	}
	return nil
}

// redact drops the password from a URI for messages.
func redact(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return uri
	}
	creds, host, ok := strings.Cut(rest, "@")
	if !ok {
		return uri
	}
	user, _, _ := strings.Cut(creds, ":")
	return scheme + "://" + user + ":***@" + host
}
