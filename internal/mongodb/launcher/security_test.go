package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/mongodb/access"
)

// connect opens a client with o and fails the test if the options are bad.
func connect(t *testing.T, o *options.ClientOptions) *mongo.Client {
	t.Helper()
	c, err := mongo.Connect(o.SetServerSelectionTimeout(3 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Disconnect(context.Background()) })
	return c
}

func insertOne(ctx context.Context, c *mongo.Client, db string) error {
	_, err := c.Database(db).Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}})
	return err
}

// A 3-member set started with a keyFile and requireTLS (members authenticate to each other
// with the keyFile over TLS) refuses plain connections, clients without the CA and anonymous
// writes, takes the admin user created through the localhost exception, creates a user with
// one database's readWrite that can write there and nowhere else, and starts again (users
// exist, the exception is closed) with the same keys after a crash of every member.
func TestSetWithAuthAndTLS(t *testing.T) {
	began := time.Now()
	sec := Security{Auth: true, AdminPassword: "adm-pw", TLS: true}
	s := ForTest(t, Options{Members: 3, BasePort: AuthTestPort, Security: sec, ElectionTimeout: 2 * time.Second})
	t.Logf("up in %s", time.Since(began).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	got := s.Security()
	if !strings.Contains(s.URI(), "tls=true&tlsCAFile="+got.CAFile) {
		t.Fatalf("URI %q lacks the TLS options", s.URI())
	}
	var ce mongo.CommandError
	func() {
		plain := connect(t, options.Client().ApplyURI(strings.Split(s.MemberURI(0), "&")[0]))
		defer plain.Disconnect(ctx)
		if err := plain.Ping(ctx, nil); err == nil {
			t.Fatal("a plain (non-TLS) connection was accepted by a requireTLS member")
		}
		untrusted := connect(t, options.Client().ApplyURI(strings.Split(s.MemberURI(0), "&")[0]+"&tls=true"))
		defer untrusted.Disconnect(ctx)
		if err := untrusted.Ping(ctx, nil); err == nil || !strings.Contains(err.Error(), "x509") {
			t.Fatalf("a client without the launcher's CA: %v, want an x509 error", err)
		}
		o, err := got.clientOptions(s.URI(), false)
		if err != nil {
			t.Fatal(err)
		}
		anon := connect(t, o)
		defer anon.Disconnect(ctx)
		if err := insertOne(ctx, anon, "shop"); !errors.As(err, &ce) || ce.Code != 13 {
			t.Fatalf("anonymous insert: %v, want Unauthorized (13)", err)
		}
	}()

	if err := s.CreateUser(ctx, User{Name: "shop", Password: "shop-pw", Grants: []Grant{{Role: "readWrite", DB: "shop"}}}); err != nil {
		t.Fatal(err)
	}
	asShop := func() *mongo.Client {
		o, err := got.clientOptions(s.URI(), false)
		if err != nil {
			t.Fatal(err)
		}
		return connect(t, o.SetAuth(options.Credential{Username: "shop", Password: "shop-pw", AuthSource: "admin"}))
	}
	shop := asShop()
	if err := insertOne(ctx, shop, "shop"); err != nil {
		t.Fatalf("shop user writing its database: %v", err)
	}
	if err := insertOne(ctx, shop, "other"); !errors.As(err, &ce) || ce.Code != 13 {
		t.Fatalf("shop user writing another database: %v, want Unauthorized (13)", err)
	}
	_ = shop.Disconnect(ctx)

	// SIGKILL, not Down: a clean stop of a 3-member set takes ~32 s here with or without
	// security (each secondary waits 15 s in its shutdown step-down, then the primary).
	s.KillAll()
	began = time.Now()
	if err := s.Up(ctx); err != nil {
		t.Fatalf("restart of a set with users: %v", err)
	}
	t.Logf("up again in %s", time.Since(began).Round(time.Millisecond))
	if err := insertOne(ctx, asShop(), "shop"); err != nil {
		t.Fatalf("shop user after the restart: %v", err)
	}
	// A set from Open knows its keys and TLS files from set.json, not the admin password, and
	// starts all the same once its users exist.
	s.KillAll()
	reopened, err := Open(s.Dir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := reopened.Up(ctx); err != nil {
		t.Fatalf("a set from Open, without the admin password: %v", err)
	}
	if p := reopened.Primary(ctx); p < 0 {
		t.Fatalf("a reopened set reports %v", reopened.Status(ctx))
	}
	// A restart with the wrong admin password is refused, not taken on trust.
	reopened.SetAdminPassword("not-the-admin-pw")
	began = time.Now()
	err = reopened.Up(ctx)
	if refused, ok := access.Refusal(err); !ok || refused.Kind != access.AuthenticationFailed || !strings.Contains(err.Error(), "log in as admin user admin") {
		t.Fatalf("Up with a wrong admin password: %v; want an authentication failure of the admin user", err)
	}
	t.Logf("wrong admin password refused in %s", time.Since(began).Round(time.Millisecond))
	reopened.KillAll()
}

// writeState writes st as dir's set.json, as Up does, without starting anything.
func writeState(t *testing.T, dir string, st state) {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stateFile(dir), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A set or cluster created with --auth --tls and started again with less, or with other key
// files, is refused before any mongod starts: it would otherwise come up open to anyone.
func TestRestartWithOtherSecurityIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	own := filepath.Join(t.TempDir(), "own")
	full := Security{Auth: true, AdminPassword: "pw", TLS: true}
	others := map[string]Security{
		"neither":     {},
		"auth only":   {Auth: true, AdminPassword: "pw"},
		"TLS only":    {TLS: true},
		"own keyFile": {Auth: true, AdminPassword: "pw", KeyFile: own, TLS: true},
		"own CA":      {Auth: true, AdminPassword: "pw", TLS: true, CAFile: own + ".ca", CertKeyFile: own + ".pem"},
	}

	dir := t.TempDir()
	secured, err := New(Options{Dir: dir, BasePort: LauncherTestPort, Security: full, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	writeState(t, dir, secured.state())
	opened, err := Open(dir, nil)
	if err != nil || opened.state() != secured.state() {
		t.Fatalf("Open reads %+v, %v; want %+v", opened.state(), err, secured.state())
	}
	if err := checkHeld(dir, opened.state()); err != nil {
		t.Fatalf("the set as it was created: %v", err)
	}
	for name, sec := range others {
		s, err := New(Options{Dir: dir, BasePort: LauncherTestPort, Security: sec, DieWithParent: true})
		if err != nil {
			t.Fatal(err)
		}
		err = s.Up(ctx)
		if !errors.Is(err, ErrOtherSecurity) || !strings.Contains(err.Error(), "started with --auth (keyFile "+filepath.Join(dir, "keyfile")+"), --tls (CA ") {
			t.Errorf("%s: Up = %v; want ErrOtherSecurity naming the set's settings", name, err)
		}
	}

	cdir := t.TempDir()
	c, err := NewCluster(ClusterOptions{Dir: cdir, Shards: 1, BasePort: LauncherClusterTestPort, Security: full, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.sets() {
		writeState(t, s.Dir(), s.state())
	}
	for name, sec := range others {
		c, err := NewCluster(ClusterOptions{Dir: cdir, Shards: 1, BasePort: LauncherClusterTestPort, Security: sec, DieWithParent: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Up(ctx); !errors.Is(err, ErrOtherSecurity) || !strings.Contains(err.Error(), filepath.Join(cdir, "cfg")+" holds") {
			t.Errorf("cluster, %s: Up = %v; want ErrOtherSecurity naming cfg", name, err)
		}
	}

	// The reverse: a cluster made without security is not given keys it would not use.
	plain := t.TempDir()
	c, err = NewCluster(ClusterOptions{Dir: plain, Shards: 1, BasePort: LauncherClusterTestPort, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.sets() {
		writeState(t, s.Dir(), s.state())
	}
	c, err = NewCluster(ClusterOptions{Dir: plain, Shards: 1, BasePort: LauncherClusterTestPort, Security: full, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Up(ctx); !errors.Is(err, ErrOtherSecurity) || !strings.Contains(err.Error(), "started with no auth, no TLS") {
		t.Errorf("plain cluster with --auth --tls: Up = %v; want ErrOtherSecurity", err)
	}
	if k := KeysIn(plain); exists(k.KeyFile) || exists(k.CAFile) {
		t.Errorf("keys made in %s for a cluster that was refused", plain)
	}
}
