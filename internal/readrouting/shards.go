package readrouting

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// ShardURIs derives one connection string per shard replica set from the
// mongos connection string and config.shards (host "rs/h1:p,h2:p"), keeping
// the credentials and options, so a Monitor can read each set's status.
func ShardURIs(ctx context.Context, mongos *mongo.Client, mongosURI string) (map[string]string, error) {
	cur, err := mongos.Database("config").Collection("shards").Find(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("read config.shards: %w", err)
	}
	var shards []struct {
		ID   string `bson:"_id"`
		Host string `bson:"host"`
	}
	if err := cur.All(ctx, &shards); err != nil {
		return nil, fmt.Errorf("read config.shards: %w", err)
	}
	out := make(map[string]string, len(shards))
	for _, s := range shards {
		u, err := ShardURI(mongosURI, s.Host)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", s.ID, err)
		}
		out[s.ID] = u
	}
	return out, nil
}

// ShardURI rewrites a mongodb:// URI to the hosts of a config.shards host
// string "set/h1:p,h2:p", adding replicaSet=set and dropping
// directConnection. Credentials, the path (the auth database, e.g. /admin)
// and the other options are kept; a URI without a path gets "/", since the
// driver refuses options not preceded by a slash ("host?opt").
func ShardURI(mongosURI, shardHost string) (string, error) {
	set, hosts, ok := strings.Cut(shardHost, "/")
	if !ok || set == "" || hosts == "" {
		return "", fmt.Errorf("shard host %q is not \"set/host:port,...\"", shardHost)
	}
	u, err := url.Parse(mongosURI)
	if err != nil {
		return "", fmt.Errorf("parse URI: %w", err)
	}
	if u.Scheme != "mongodb" {
		return "", fmt.Errorf("URI scheme %q: need mongodb:// (SRV names the mongos, not the shards)", u.Scheme)
	}
	u.Host = hosts
	if u.Path == "" {
		u.Path, u.RawPath = "/", ""
	}
	q := u.Query()
	q.Set("replicaSet", set)
	q.Del("directConnection")
	u.RawQuery = q.Encode()
	return u.String(), nil
}
