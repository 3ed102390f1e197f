package live_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/advise/live"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

// A user without roles is refused in one line that names the roles needed, and those roles are
// enough on a replica set (read; dbAdmin for the profiler). The set runs with
// --keyFile (access control on; a replica set needs the key file for it): the launcher
// initiates it through the localhost exception, then the test creates an admin and a user
// without roles.
func TestRefusesAUserWithoutRoles(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "keyfile")
	if err := os.WriteFile(key, []byte(strings.Repeat("c2hhcmRtYXJ0", 8)), 0o400); err != nil {
		t.Fatal(err)
	}
	port := launcher.AdviseTestPort + 80
	set := launcher.ForTest(t, launcher.Options{Members: 1, BasePort: port, Dir: filepath.Join(dir, "set"), ExtraArgs: []string{"--keyFile", key}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	local, err := mongo.Connect(options.Client().ApplyURI(set.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Disconnect(context.Background())
	createUser := func(c *mongo.Client, name string, roles bson.A) {
		t.Helper()
		if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "createUser", Value: name}, {Key: "pwd", Value: "pw-" + name}, {Key: "roles", Value: roles}}).Err(); err != nil {
			t.Fatalf("createUser %s: %v", name, err)
		}
	}
	createUser(local, "admin", bson.A{"root"})
	admin, err := mongo.Connect(options.Client().ApplyURI(set.URI()).SetAuth(options.Credential{Username: "admin", Password: "pw-admin"}))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Disconnect(context.Background())
	createUser(admin, "nobody", bson.A{})
	var docs []any
	for range 200 {
		docs = append(docs, bson.D{{Key: "user_id", Value: "u1"}})
	}
	if _, err := admin.Database("shop").Collection("orders").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	connect := func(user string) *live.Client {
		t.Helper()
		uri := strings.Replace(set.URI(), "mongodb://", "mongodb://"+user+":pw-"+user+"@", 1)
		if !strings.Contains(uri, "?") {
			uri += "/?authSource=admin"
		} else {
			uri += "&authSource=admin"
		}
		src, err := live.Connect(ctx, uri)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = src.Close(context.Background()) })
		return src
	}
	_, err = live.Read(ctx, connect("nobody"), "shop.orders", live.Options{})
	refusal(t, err, "not allowed to read $collStats of shop.orders: the user needs "+live.RolesNeeded)

	// The roles named are enough on a replica set: read for the advice, dbAdmin for the profiler.
	createUser(admin, "reader", bson.A{bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "shop"}}})
	reader := connect("reader")
	if _, err := live.Read(ctx, reader, "shop.orders", live.Options{}); err != nil {
		t.Errorf("read role on shop: %v", err)
	}
	_, err = live.Read(ctx, reader, "shop.orders", live.Options{ProfileSeconds: 1, Wait: func(context.Context, time.Duration) error { return nil }})
	refusal(t, err, "not allowed to read the profiler level of shop: the user needs ")
	createUser(admin, "profiler", bson.A{bson.D{{Key: "role", Value: "read"}, {Key: "db", Value: "shop"}}, bson.D{{Key: "role", Value: "dbAdmin"}, {Key: "db", Value: "shop"}}})
	if _, err := live.Read(ctx, connect("profiler"), "shop.orders", live.Options{ProfileSeconds: 1, Wait: func(context.Context, time.Duration) error { return nil }}); err != nil {
		t.Errorf("read and dbAdmin on shop, --profile-seconds: %v", err)
	}
}
