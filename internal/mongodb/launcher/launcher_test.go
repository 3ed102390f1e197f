package launcher

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/eventually"
)

// A 3-member set comes up with member 0 as PRIMARY (priority 2), the URI reaches it through
// discovery, and after member 0 is killed and restarted it takes the primary back.
func TestThreeMemberSetElectsAndRecovers(t *testing.T) {
	s := ForTest(t, Options{Members: 3, BasePort: LauncherTestPort, ElectionTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if uri := s.URI(); !strings.HasPrefix(uri, "mongodb://127.0.0.1:") || !strings.HasSuffix(uri, "/?replicaSet=rs0") {
		t.Fatalf("URI %q", uri)
	}
	if p, err := s.WaitPrimary(ctx); err != nil || p != 0 {
		t.Fatalf("primary %d, %v; want member 0", p, err)
	}
	for _, st := range s.Status(ctx) {
		if st.Version != DefaultVersion {
			t.Errorf("member %d runs %q, want %s", st.Index, st.Version, DefaultVersion)
		}
	}
	c, err := mongo.Connect(options.Client().ApplyURI(s.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(context.Background())
	if _, err := c.Database("t").Collection("c").InsertOne(ctx, bson.D{{Key: "x", Value: 1}}); err != nil {
		t.Fatalf("insert through the set URI: %v", err)
	}
	if err := s.Kill(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if p, err := s.WaitPrimary(ctx); err != nil || p == 0 {
		t.Fatalf("after killing member 0: primary %d, %v", p, err)
	}
	if err := s.StartMember(ctx, 0); err != nil {
		t.Fatal(err)
	}
	eventually.NoError(t, 2*time.Minute, func() error {
		if s.Primary(ctx) != 0 {
			return fmt.Errorf("member 0 (priority 2) did not take the primary back: %v", s.Status(ctx))
		}
		return nil
	})
}

// Down stops every member cleanly (no SIGKILL needed) and Open finds the set from its directory.
func TestDownStopsEveryMember(t *testing.T) {
	dir := t.TempDir()
	s := ForTest(t, Options{Dir: dir, Members: 1, BasePort: LauncherTestPort + 5})
	again, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := again.Down(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range s.Members() {
		if s.Running(i) {
			t.Errorf("member %d still running after Down", i)
		}
	}
	if st := again.Status(ctx); st[0].State != "DOWN" {
		t.Errorf("status after down: %+v", st)
	}
}

func TestOpenWithoutSet(t *testing.T) {
	if _, err := Open(t.TempDir(), nil); err == nil || !strings.Contains(err.Error(), "mongo up") {
		t.Fatalf("Open on an empty dir: %v", err)
	}
}

// A port held by a foreign process is reported with its address, not a hang.
func TestPortInUse(t *testing.T) {
	s := ForTest(t, Options{Members: 1, BasePort: LauncherTestPort + 7})
	other, err := New(Options{Dir: t.TempDir(), Members: 1, BasePort: LauncherTestPort + 7, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	err = other.StartMember(context.Background(), 0)
	if err == nil || !strings.Contains(err.Error(), s.Members()[0].Host) {
		t.Fatalf("second set on the same port: %v", err)
	}
}

// A sharded cluster without a router: the config server knows both shards, a second Up
// registers nothing twice, and the chunk size is set.
func TestShardedClusterRegistersItsShards(t *testing.T) {
	c := ClusterForTest(t, ClusterOptions{Shards: 2, ChunkSizeMB: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, err := c.RegisteredShards(ctx)
	if err != nil || strings.Join(got, ",") != "sh0,sh1" {
		t.Fatalf("config.shards: %v, %v; want sh0,sh1", got, err)
	}
	if err := c.Up(ctx); err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if got, err := c.RegisteredShards(ctx); err != nil || len(got) != 2 {
		t.Fatalf("after a second Up: %v, %v", got, err)
	}
	err = c.withConfig(ctx, func(admin *mongo.Database) error {
		var doc struct {
			Value int `bson:"value"`
		}
		if err := admin.Client().Database("config").Collection("settings").FindOne(ctx, bson.D{{Key: "_id", Value: "chunksize"}}).Decode(&doc); err != nil {
			return err
		}
		if doc.Value != 1 {
			return fmt.Errorf("chunk size %d MB, want 1", doc.Value)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Shards {
		if st := s.Status(ctx); len(st) != 1 || st[0].State != "PRIMARY" || !strings.HasPrefix(st[0].Version, "6.0") {
			t.Errorf("shard %s: %+v, want one PRIMARY running 6.0", s.Name(), st)
		}
		// The shard itself knows it joined: its shardIdentity names the config server's set.
		var id struct {
			ShardName                 string `bson:"shardName"`
			ConfigsvrConnectionString string `bson:"configsvrConnectionString"`
		}
		err := s.withMember(ctx, 0, func(cl *mongo.Client) error {
			return cl.Database("admin").Collection("system.version").FindOne(ctx, bson.D{{Key: "_id", Value: "shardIdentity"}}).Decode(&id)
		})
		if err != nil || id.ShardName != s.Name() || !strings.HasPrefix(id.ConfigsvrConnectionString, c.Config.Name()+"/") {
			t.Errorf("shard %s identity: %+v, %v", s.Name(), id, err)
		}
	}
}
