package launcher

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
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

// A set started with a keyFile and requireTLS refuses plain connections and anonymous reads,
// takes the admin user created through the localhost exception, creates a user with one
// database's readWrite that can write there and nowhere else, and starts again (users exist,
// the exception is closed) with the same keys.
func TestSetWithAuthAndTLS(t *testing.T) {
	sec := Security{Auth: true, AdminPassword: "adm-pw", TLS: true}
	s := ForTest(t, Options{BasePort: AuthTestPort, Security: sec})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	got := s.Security()
	if !strings.Contains(s.URI(), "tls=true&tlsCAFile="+got.CAFile) {
		t.Fatalf("URI %q lacks the TLS options", s.URI())
	}

	plain := connect(t, options.Client().ApplyURI(strings.Split(s.MemberURI(0), "&")[0]))
	if err := plain.Ping(ctx, nil); err == nil {
		t.Fatal("a plain (non-TLS) connection was accepted by a requireTLS member")
	}
	untrusted := connect(t, options.Client().ApplyURI(strings.Split(s.MemberURI(0), "&")[0]+"&tls=true"))
	if err := untrusted.Ping(ctx, nil); err == nil || !strings.Contains(err.Error(), "x509") {
		t.Fatalf("a client without the launcher's CA: %v, want an x509 error", err)
	}

	anon, err := got.clientOptions(s.URI(), false)
	if err != nil {
		t.Fatal(err)
	}
	var ce mongo.CommandError
	if err := insertOne(ctx, connect(t, anon), "shop"); !errors.As(err, &ce) || ce.Code != 13 {
		t.Fatalf("anonymous insert: %v, want Unauthorized (13)", err)
	}

	if err := s.CreateUser(ctx, User{Name: "shop", Password: "shop-pw", Grants: []Grant{{Role: "readWrite", DB: "shop"}}}); err != nil {
		t.Fatal(err)
	}
	asShop, _ := got.clientOptions(s.URI(), false)
	shop := connect(t, asShop.SetAuth(options.Credential{Username: "shop", Password: "shop-pw", AuthSource: "admin"}))
	if err := insertOne(ctx, shop, "shop"); err != nil {
		t.Fatalf("shop user writing its database: %v", err)
	}
	if err := insertOne(ctx, shop, "other"); !errors.As(err, &ce) || ce.Code != 13 {
		t.Fatalf("shop user writing another database: %v, want Unauthorized (13)", err)
	}

	if err := s.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Up(ctx); err != nil {
		t.Fatalf("restart of a set with users: %v", err)
	}
	if err := insertOne(ctx, shop, "shop"); err != nil {
		t.Fatalf("shop user after the restart: %v", err)
	}
	reopened, err := Open(s.Dir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := reopened.Status(ctx); st[0].State != "PRIMARY" {
		t.Fatalf("a reopened set (TLS settings from set.json) reports %v", st)
	}
}
