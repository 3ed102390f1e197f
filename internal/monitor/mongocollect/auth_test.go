package mongocollect_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/mongodb/access"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/mongodb/shardtest"
	"github.com/shardmart/shardmart/internal/monitor/mongocollect"
	"github.com/shardmart/shardmart/internal/readrouting"
)

// authLive is a cluster that enforces authorization and accepts TLS only: a config server and
// one shard (one member each) sharing a keyFile and a CA the launcher made, started on first
// use on its own ports.
var authLive = shardtest.Shared{Opts: launcher.ClusterOptions{Shards: 1, BasePort: launcher.AuthClusterTestPort,
	Security: launcher.Security{Auth: true, AdminPassword: "admin-pw", TLS: true}}}

// The hot-shard monitor's user: clusterMonitor alone (it includes find on config's
// collections, so read on config adds nothing), created on the config server and on each
// shard (the monitor logs in to the shards directly).
var monitorUser = launcher.HotShardMonitorUser("monitor", "monitor-pw")

// The hot-shard monitor with authorization enforced: every collector but the balancer's (see below) succeeds as
// the monitor's user over TLS and reports the shard and the collection; a user with read on
// config but not clusterMonitor fails the collectors that need it with one line naming the
// role, and a wrong password fails them with one line instead of reporting the shard down.
func TestMonitorUserOverTLS(t *testing.T) {
	c, r := authLive.Get(t)
	ctx := eventually.Context(t, 3*time.Minute)
	ns := liveNS(t)
	shardColl(ctx, t, r, ns, bson.D{{Key: "k", Value: "hashed"}})
	docs, _ := items(100, 100)
	if _, err := r.Place(ctx, ns, docs); err != nil {
		t.Fatal(err)
	}
	as := func(u launcher.User) string {
		if err := c.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		uri, err := readrouting.WithCredentials(c.ConfigURI(), readrouting.Credentials{User: u.Name, Password: u.Password})
		if err != nil {
			t.Fatal(err)
		}
		return uri
	}

	monitorURI := as(monitorUser)
	reg := exporterAt(t, monitorURI)
	success := values(t, reg, "shardmart_monitor_collector_success")
	if len(success) != len((&mongocollect.Cluster{}).Collectors()) {
		t.Fatalf("collector_success %v: want every collector", success)
	}
	for coll, ok := range success {
		// Without a mongos the balancer's state is asked of the config server with an internal
		// command, which no role but the members' own grants (through a mongos the collector
		// sends the public balancerStatus).
		if want := coll != "collector=mongo_balancer"; (ok == 1) != want {
			t.Errorf("%s success %v as the monitor user, want %v", coll, ok, want)
		}
	}
	if got := values(t, reg, "shardmart_mongo_shard_up"); got["shard=sh0"] != 1 {
		t.Errorf("shard_up %v, want sh0 up", got)
	}
	if got := values(t, reg, "shardmart_mongo_collection_documents")["namespace="+ns+",shard=sh0"]; got != 100 {
		t.Errorf("documents of %s on sh0: %v, want 100", ns, got)
	}

	// One collector at a time, so that each error is the collector's own.
	refusal := func(uri, collector string) error {
		mc, err := mongocollect.Open(mongocollect.Options{URI: uri})
		if err != nil {
			t.Fatal(err)
		}
		defer mc.Close(context.Background())
		for _, col := range mc.Collectors() {
			if col.Name() == collector {
				ch := make(chan prometheus.Metric, 1000)
				return col.Update(ctx, ch)
			}
		}
		t.Fatalf("no collector %s", collector)
		return nil
	}
	oneLine := func(err error, kind access.Kind, want string) {
		t.Helper()
		var refused *access.Error
		if !errors.As(err, &refused) || refused.Kind != kind {
			t.Fatalf("error %v: want an access.Error of kind %d", err, kind)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, want) {
			t.Fatalf("error %q: want one line containing %q", msg, want)
		}
		t.Log(err)
	}
	oneLine(refusal(monitorURI, "mongo_balancer"), access.Unauthorized,
		"mongodb: not authorized to run _configsvrBalancerStatus on admin: an internal command")
	noClusterMonitor := as(launcher.User{Name: "configreader", Password: "cr-pw", Grants: []launcher.Grant{{Role: "read", DB: "config"}}})
	oneLine(refusal(noClusterMonitor, "mongo_serverstatus"), access.Unauthorized,
		"shard sh0: mongodb: not authorized to run serverStatus on admin: the user needs the clusterMonitor role (on admin)")
	oneLine(refusal(noClusterMonitor, "mongo_currentop"), access.Unauthorized,
		"mongodb: not authorized to run aggregate on admin: the user needs the clusterMonitor role (on admin)")
	wrong, err := readrouting.WithCredentials(c.ConfigURI(), readrouting.Credentials{User: monitorUser.Name, Password: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	oneLine(refusal(wrong, "mongo_shards"), access.AuthenticationFailed, "mongodb: authentication failed: wrong user name or password")
}
