package mongostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/shardmart/shardmart/internal/mongodb/access"
	"github.com/shardmart/shardmart/internal/readrouting"
)

// LagOptions configure the replication-lag monitor WatchLagWith starts.
type LagOptions struct {
	// Interval between measurements; zero means 1 s (which suits 5 s budgets).
	Interval time.Duration
	// Heartbeat is how often the heartbeat document is written on each set's primary; zero
	// means readrouting.DefaultHeartbeatInterval (500 ms).
	Heartbeat time.Duration
	// Oplog is how often each set's oplog window is read (for the metrics); zero means
	// readrouting.DefaultOplogInterval (15 s).
	Oplog time.Duration
	// Credentials, when set, replace the URI's for the monitor's own connections (each shard
	// replica set behind a mongos, or the replica set itself): mongos users do not exist on
	// the shards.
	Credentials readrouting.Credentials
	// ProbeTimeout bounds the start-up check of the monitor's access to every set (zero: 10 s;
	// ctx's deadline too). Generous: a refusal answers within a round trip, but a loaded host
	// may take seconds to open a TLS connection, and a refusal cut off is not reported.
	ProbeTimeout time.Duration
}

// WatchLag is WatchLagWith with the URI's own credentials and the given interval.
func (s *Store) WatchLag(ctx context.Context, uri string, interval time.Duration) error {
	return s.WatchLagWith(ctx, uri, LagOptions{Interval: interval})
}

// WatchLagWith starts readrouting's replication-lag monitor and routes reads by its snapshots
// from then on; Close stops it. What it monitors depends on what uri (the URI the store was
// opened with) names, as `hello` tells:
//   - a mongos (msg "isdbgrid"): every shard replica set in config.shards, through URIs derived
//     from uri (readrouting.MonitorShardURIs);
//   - a replica set (hello has setName): that set itself, through uri;
//   - anything else (a standalone mongod): an error.
//
// Without a monitor (or when it cannot start) every read goes to the primary, which is always
// safe. Call it once, before the store serves requests.
func (s *Store) WatchLagWith(ctx context.Context, uri string, o LagOptions) error {
	if s.stopLag != nil {
		return errors.New("mongo: lag monitor already running")
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	uris, err := s.lagTargets(ctx, uri, o.Credentials)
	if err != nil {
		return fmt.Errorf("mongo: lag monitor: %w", err)
	}
	sources := make(map[string]readrouting.StatusSource, len(uris))
	var clients []*mongo.Client
	for name, u := range uris {
		c, err := mongo.Connect(options.Client().ApplyURI(u))
		if err != nil {
			disconnectAll(clients)
			return fmt.Errorf("mongo: lag monitor: connect to %s: %w", name, err)
		}
		clients = append(clients, c)
		sources[name] = readrouting.DriverSource{Client: c}
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = defaultProbeTimeout
	}
	if err := probeAccess(ctx, sources, o.ProbeTimeout); err != nil {
		disconnectAll(clients)
		return fmt.Errorf("mongo: lag monitor: %w", err)
	}
	m := readrouting.NewMonitor(sources, o.Interval)
	if o.Heartbeat > 0 {
		m.HeartbeatInterval = o.Heartbeat
	}
	m.OplogInterval = o.Oplog
	if s.metrics != nil {
		s.metrics.Watch(m)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(runCtx)
	}()
	s.lag = m.Snapshot
	s.stopLag = func() {
		cancel()
		<-done
		disconnectAll(clients)
	}
	return nil
}

// LagSnapshot is the latest replication-lag measurement the store routes reads by (zero
// without a monitor or before its first round).
func (s *Store) LagSnapshot() readrouting.LagSnapshot {
	if s.lag == nil {
		return readrouting.LagSnapshot{}
	}
	return s.lag()
}

// helloReply is the part of `hello` that tells a mongos from a replica-set member.
type helloReply struct {
	Msg     string `bson:"msg"`     // "isdbgrid" on a mongos
	SetName string `bson:"setName"` // the replica set of a member
}

// lagTargetKind classifies a hello reply: "mongos", "replset", or an error.
func lagTargetKind(h helloReply) (string, error) {
	switch {
	case h.Msg == "isdbgrid":
		return "mongos", nil
	case h.SetName != "":
		return "replset", nil
	default:
		return "", errors.New("the server is neither a mongos nor a replica-set member (a standalone mongod has no secondaries)")
	}
}

// lagTargets returns the replica sets to monitor, by name, with the URI to reach each.
func (s *Store) lagTargets(ctx context.Context, uri string, cred readrouting.Credentials) (map[string]string, error) {
	var h helloReply
	if err := s.client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}},
		options.RunCmd().SetReadPreference(readpref.Primary())).Decode(&h); err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	kind, err := lagTargetKind(h)
	if err != nil {
		return nil, err
	}
	if kind == "replset" {
		u, err := readrouting.WithCredentials(uri, cred)
		if err != nil {
			return nil, err
		}
		return map[string]string{h.SetName: u}, nil
	}
	uris, err := readrouting.MonitorShardURIs(ctx, s.client, uri, cred)
	if err != nil {
		return nil, err
	}
	if len(uris) == 0 {
		return nil, errors.New("config.shards lists no shard")
	}
	return uris, nil
}

// probeAccess measures each set once and writes its heartbeat, so that a login or a role the
// monitor lacks stops it at start with one line naming what is missing, rather than leaving
// every read on the primary with the reason only in each snapshot. A set that is merely
// unreachable now is the monitor's business, not a refusal: the probes run concurrently and
// give up after limit, so a shard that is down delays the start by that much at most. Of
// several refusals, the first set's by name is reported, so the same cluster gives the same line.
func probeAccess(ctx context.Context, sources map[string]readrouting.StatusSource, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var (
		mu       sync.Mutex
		refusals = map[string]error{}
		wg       sync.WaitGroup
	)
	for name, src := range sources {
		wg.Go(func() {
			_, err := src.ReplSetStatus(ctx)
			if hb, ok := src.(readrouting.Heartbeater); ok && err == nil {
				err = hb.Heartbeat(ctx, name, time.Now())
			}
			if refused, ok := access.Refusal(err); ok && refused.Certain() {
				mu.Lock()
				refusals[name] = fmt.Errorf("set %s: %w", name, refused)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(refusals) == 0 {
		return nil
	}
	return refusals[slices.Min(slices.Collect(maps.Keys(refusals)))]
}

// defaultProbeTimeout bounds probeAccess. A refusal answers within a round trip; a TLS
// mismatch only when server selection gives up, so within this bound only when the URI's
// serverSelectionTimeoutMS is shorter.
const defaultProbeTimeout = 10 * time.Second

func disconnectAll(clients []*mongo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range clients {
		_ = c.Disconnect(ctx)
	}
}
