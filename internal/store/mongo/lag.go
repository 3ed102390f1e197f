package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/readrouting"
)

// WatchLag starts readrouting's replication-lag monitor over every shard replica set behind
// the mongos at uri and routes reads by its snapshots from then on; Close stops it. Without it
// (or when it cannot start, e.g. the URI names a plain replica set) every read goes to the
// primary, which is always safe. Call it once, before the store serves requests.
func (s *Store) WatchLag(ctx context.Context, uri string, interval time.Duration) error {
	uris, err := readrouting.ShardURIs(ctx, s.client, uri)
	if err != nil {
		return fmt.Errorf("mongo: lag monitor: %w", err)
	}
	if len(uris) == 0 {
		return errors.New("mongo: lag monitor: config.shards lists no shard (not a mongos?)")
	}
	sources := make(map[string]readrouting.StatusSource, len(uris))
	var clients []*mongo.Client
	for name, u := range uris {
		c, err := mongo.Connect(options.Client().ApplyURI(u))
		if err != nil {
			disconnectAll(clients)
			return fmt.Errorf("mongo: lag monitor: connect to shard %s: %w", name, err)
		}
		clients = append(clients, c)
		sources[name] = readrouting.DriverSource{Client: c}
	}
	m := readrouting.NewMonitor(sources, interval)
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

func disconnectAll(clients []*mongo.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range clients {
		_ = c.Disconnect(ctx)
	}
}
