package cli

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/migrate"
	"github.com/shardmart/shardmart/internal/mongodb/access"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/readrouting"
	"github.com/shardmart/shardmart/internal/store/mongostore"
)

// `mongo up --auth --tls` starts a set that refuses plain connections and anonymous clients,
// keeps the admin password in a 0600 file and prints a TLS URI last; `mongo users` creates
// the least-privilege users, as whom the shop opens its database and migrate builds and drops
// its indexes there; `status` and `down` reach the set with the TLS settings from set.json.
func TestMongoUpAuthTLSAndUsers(t *testing.T) {
	dir := t.TempDir()
	port := launcher.AuthCLITestPort
	out, err := runMongo(t, "up", "--dir", dir, "--port", itoa(port), "--auth", "--tls")
	t.Cleanup(func() {
		if s, err := launcher.Open(dir, nil); err == nil {
			s.KillAll()
		}
	})
	if err != nil {
		t.Fatalf("up --auth --tls: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	uri := lines[len(lines)-1]
	if want := "mongodb://127.0.0.1:" + itoa(port) + "/?replicaSet=rs0&tls=true&tlsCAFile=" + filepath.Join(dir, "tls", "ca.pem"); uri != want {
		t.Fatalf("last line of up: %q, want %q", uri, want)
	}
	if !strings.Contains(out, "password in "+filepath.Join(dir, "admin.password")) {
		t.Errorf("up does not say where the admin password is:\n%s", out)
	}

	out, err = runMongo(t, "users", "--dir", dir, "--db", "shop")
	if err != nil {
		t.Fatalf("users: %v\n%s", err, out)
	}
	for _, want := range []string{"shardmart_shop     readWrite@shop", "shardmart_lag      clusterMonitor@admin, readWrite@shardmart_monitor",
		"shardmart_monitor  clusterMonitor@admin"} {
		if !strings.Contains(out, want) {
			t.Errorf("users output lacks %q:\n%s", want, out)
		}
	}
	pw, err := launcher.ReadPasswordFile(filepath.Join(dir, "users", "shardmart_shop.password"))
	if err != nil {
		t.Fatal(err)
	}
	shopURI, err := readrouting.WithCredentials(uri, readrouting.Credentials{User: "shardmart_shop", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := mongostore.Open(ctx, mongostore.Options{URI: shopURI, Database: "shop"})
	if err != nil {
		t.Fatalf("the shop as shardmart_shop: %v", err)
	}
	_ = s.Close()
	src, err := migrate.OpenMongoSource(ctx, shopURI, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if err := src.EnsureIndexes(ctx); err != nil {
		t.Fatalf("migrate's indexes as shardmart_shop: %v", err)
	}
	if err := src.DropIndexes(ctx); err != nil {
		t.Fatalf("migrate's indexes as shardmart_shop: %v", err)
	}
	_ = src.Close()
	if _, err := migrate.OpenMongoSource(ctx, uri, "shop"); err != nil {
		t.Fatalf("an anonymous client may ping: %v", err)
	}
	anon, err := mongostore.Open(ctx, mongostore.Options{URI: uri, Database: "shop"})
	var ce mongo.CommandError
	if err == nil || !errors.As(err, &ce) || ce.Code != 13 || strings.Contains(err.Error(), "\n") {
		t.Fatalf("the shop without a login: %v, %v; want one line, Unauthorized", anon, err)
	}

	// A second `users` run reuses the passwords.
	if out, err = runMongo(t, "users", "--dir", dir, "--db", "shop"); err != nil {
		t.Fatalf("users again: %v\n%s", err, out)
	}
	if again, _ := launcher.ReadPasswordFile(filepath.Join(dir, "users", "shardmart_shop.password")); again != pw {
		t.Error("a second `mongo users` changed the shop's password")
	}
	if out, err = runMongo(t, "status", "--dir", dir); err != nil || !strings.Contains(out, "PRIMARY") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if out, err = runMongo(t, "down", "--dir", dir); err != nil || !strings.Contains(out, "stopped") {
		t.Fatalf("down: %v\n%s", err, out)
	}
}

// `mongo up --shards 1 --auth --tls` starts a config server and a shard sharing a keyFile and a
// CA, registers the shard over TLS as a member would, and `users` creates the users in both
// sets; `status` lists the registered shard from set.json's keys alone.
func TestMongoUpShardsAuthTLSAndUsers(t *testing.T) {
	dir := t.TempDir()
	port := launcher.AuthCLIClusterTestPort
	out, err := runMongo(t, "up", "--dir", dir, "--port", itoa(port), "--shards", "1", "--auth", "--tls")
	t.Cleanup(func() {
		if c, err := launcher.OpenCluster(dir, nil); err == nil {
			c.KillAll()
		}
	})
	if err != nil {
		t.Fatalf("up --shards 1 --auth --tls: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	cfgURI := lines[len(lines)-1]
	if want := "mongodb://127.0.0.1:" + itoa(port) + "/?replicaSet=cfg&tls=true&tlsCAFile=" + filepath.Join(dir, "tls", "ca.pem"); cfgURI != want {
		t.Fatalf("last line of up: %q, want %q", cfgURI, want)
	}
	if out, err = runMongo(t, "users", "--dir", dir); err != nil || !strings.Contains(out, "shardmart_monitor  clusterMonitor@admin") {
		t.Fatalf("users: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := launcher.OpenCluster(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Each user exists only in the sets it logs in to: the shop's on the config server (a
	// mongos's), the lag monitor's on the shards, the hot-shard monitor's in both.
	for _, u := range []struct {
		name string
		in   []*launcher.Set
		cmd  string
	}{
		{"shardmart_monitor", c.Sets(), "serverStatus"},
		{"shardmart_shop", []*launcher.Set{c.Config}, "connectionStatus"},
		{"shardmart_lag", c.Shards, "replSetGetStatus"},
	} {
		pw, err := launcher.ReadPasswordFile(filepath.Join(dir, "users", u.name+".password"))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range c.Sets() {
			uri, err := readrouting.WithCredentials(s.URI(), readrouting.Credentials{User: u.name, Password: pw})
			if err != nil {
				t.Fatal(err)
			}
			cl, err := mongo.Connect(options.Client().ApplyURI(uri))
			if err != nil {
				t.Fatal(err)
			}
			err = cl.Database("admin").RunCommand(ctx, bson.D{{Key: u.cmd, Value: 1}}).Err()
			_ = cl.Disconnect(ctx)
			refused, _ := access.Refusal(err)
			switch want := slices.Contains(u.in, s); {
			case want && err != nil:
				t.Errorf("%s on %s as %s: %v", u.cmd, s.Name(), u.name, err)
			case !want && (refused == nil || refused.Kind != access.AuthenticationFailed):
				t.Errorf("%s logging in to %s: %v; want authentication failed (no such user there)", u.name, s.Name(), err)
			}
		}
	}
	if out, err = runMongo(t, "status", "--dir", dir); err != nil || !strings.Contains(out, "registered shards: sh0") {
		t.Fatalf("status: %v\n%s", err, out)
	}
}
