package readrouting

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"go.mongodb.org/mongo-driver/v2/mongo"
)

// Credentials are the lag monitor's own login on the replica sets it connects to. On a sharded
// cluster the users of the mongos live on the config servers, not on the shards, so the mongos
// credentials fail there; give the monitor a shard-local user (in admin, with clusterMonitor
// for replSetGetStatus and readWrite on shardmart_monitor for the heartbeat). The zero value
// keeps the connection string's own credentials.
type Credentials struct {
	User     string
	Password string
}

// IsZero reports whether no monitor credentials were given.
func (c Credentials) IsZero() bool { return c.User == "" && c.Password == "" }

// WithCredentials returns uri with its user and password replaced by c's; the zero c returns
// uri unchanged. Other options (authMechanism, tls, …) are kept. When uri names no authSource,
// authSource=admin is added: a monitor user is a server-wide user, while without it the driver
// would authenticate against the URI's path database.
func WithCredentials(uri string, c Credentials) (string, error) {
	if c.IsZero() {
		return uri, nil
	}
	if c.User == "" {
		return "", errors.New("monitor credentials: a password without a user")
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "", fmt.Errorf("parse URI: %w", err)
	}
	if u.Scheme != "mongodb" && u.Scheme != "mongodb+srv" {
		return "", fmt.Errorf("URI scheme %q: need mongodb://", u.Scheme)
	}
	u.User = url.UserPassword(c.User, c.Password)
	if u.Path == "" {
		u.Path, u.RawPath = "/", ""
	}
	q := u.Query()
	if !q.Has("authSource") {
		q.Set("authSource", "admin")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// MonitorShardURIs is ShardURIs with the monitor's credentials in place of the mongos ones
// (zero c: the mongos URI's own). config.shards is read through mongos, as the application;
// only the derived shard URIs carry c.
func MonitorShardURIs(ctx context.Context, mongos *mongo.Client, mongosURI string, c Credentials) (map[string]string, error) {
	uri, err := WithCredentials(mongosURI, c)
	if err != nil {
		return nil, err
	}
	return ShardURIs(ctx, mongos, uri)
}
