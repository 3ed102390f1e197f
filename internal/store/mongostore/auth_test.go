package mongostore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardmart/shardmart/internal/eventually"
	"github.com/shardmart/shardmart/internal/mongodb/access"
	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/readrouting"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

func shopUser(name, db string) launcher.User { return launcher.ShopUser(name, name+"-pw", db) }

var lagMonitorUser = launcher.LagMonitorUser("lagmon", "lagmon-pw")

// TestLeastPrivilegeOverTLS runs the shop against a replica set that enforces authorization
// (keyFile, admin user) and accepts TLS only, as the least-privileged users: the whole contract
// suite as a user with readWrite on the shop's database alone, the replication-lag monitor as
// a user with clusterMonitor and readWrite on its heartbeat database. A wrong password, a role
// missing, an untrusted certificate and a plain connection each fail with one line naming it.
func TestLeastPrivilegeOverTLS(t *testing.T) {
	set := launcher.ForTest(t, launcher.Options{BasePort: launcher.AuthShopTestPort,
		Security: launcher.Security{Auth: true, AdminPassword: "admin-pw", TLS: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	login := func(uri string, u launcher.User) string {
		uri, err := readrouting.WithCredentials(uri, readrouting.Credentials{User: u.Name, Password: u.Password})
		if err != nil {
			t.Fatal(err)
		}
		return uri
	}
	as := func(u launcher.User) string { return login(set.URI(), u) }
	create := func(u launcher.User) launcher.User {
		if err := set.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	open := func(t *testing.T, u launcher.User, db string) *Store {
		s, err := Open(ctx, Options{URI: as(u), Database: db})
		if err != nil {
			t.Fatalf("open %s as %s: %v", db, u.Name, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	shop := create(shopUser("shop", "shop_lp"))
	create(lagMonitorUser)

	t.Run("contract suite as the shop user", func(t *testing.T) {
		var fresh atomic.Int64
		storetest.Run(t, contractBackend(open(t, shop, "shop_lp"), func(t *testing.T) *Store {
			db := fmt.Sprintf("shop_lp_outbox%d", fresh.Add(1))
			return open(t, create(shopUser("shop_"+db, db)), db)
		}))
	})

	t.Run("lag monitor as its own user", func(t *testing.T) {
		s := open(t, shop, "shop_lp")
		creds := readrouting.Credentials{User: lagMonitorUser.Name, Password: lagMonitorUser.Password}
		if err := s.WatchLagWith(ctx, as(shop), LagOptions{Interval: 100 * time.Millisecond, Credentials: creds}); err != nil {
			t.Fatal(err)
		}
		eventually.NoError(t, 30*time.Second, func() error {
			snap := s.LagSnapshot()
			if len(snap.Members) == 0 || len(snap.Errors) > 0 {
				return fmt.Errorf("lag snapshot %+v: want the set's members and no error", snap)
			}
			return nil
		})
	})

	// Each refusal is one line that names what is wrong.
	oneLine := func(t *testing.T, err error, kind access.Kind, want string) {
		t.Helper()
		var refused *access.Error
		if !errors.As(err, &refused) || refused.Kind != kind {
			t.Fatalf("error %v: want an access.Error of kind %d", err, kind)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, want) || len(msg) > 400 {
			t.Fatalf("error %q: want one line (< 400 bytes) containing %q", msg, want)
		}
		t.Log(err)
	}
	t.Run("wrong password", func(t *testing.T) {
		_, err := Open(ctx, Options{URI: as(launcher.User{Name: shop.Name, Password: "wrong"}), Database: "shop_lp"})
		oneLine(t, err, access.AuthenticationFailed, "authentication failed: wrong user name or password")
	})
	t.Run("shop user without readWrite", func(t *testing.T) {
		_, err := Open(ctx, Options{URI: as(lagMonitorUser), Database: "shop_lp"})
		oneLine(t, err, access.Unauthorized, "the shop's user needs readWrite on shop_lp")
	})
	t.Run("lag monitor without clusterMonitor", func(t *testing.T) {
		s := open(t, shop, "shop_lp")
		err := s.WatchLagWith(ctx, as(shop), LagOptions{Credentials: readrouting.Credentials{User: shop.Name, Password: shop.Password}})
		oneLine(t, err, access.Unauthorized, "not authorized to run replSetGetStatus on admin: the user needs the clusterMonitor role (on admin)")
	})
	t.Run("lag monitor without its heartbeat database", func(t *testing.T) {
		u := create(launcher.User{Name: "nohb", Password: "nohb-pw", Grants: []launcher.Grant{{Role: "clusterMonitor", DB: "admin"}}})
		s := open(t, shop, "shop_lp")
		err := s.WatchLagWith(ctx, as(shop), LagOptions{Credentials: readrouting.Credentials{User: u.Name, Password: u.Password}})
		oneLine(t, err, access.Unauthorized, "the user needs the readWrite role on "+readrouting.HeartbeatDatabase)
	})
	plain := "mongodb://" + strings.Join(set.Hosts(), ",") + "/?replicaSet=" + set.Name() + "&serverSelectionTimeoutMS=3000"
	t.Run("untrusted certificate", func(t *testing.T) {
		_, err := Open(ctx, Options{URI: login(plain+"&tls=true", shop), Database: "shop_lp"})
		oneLine(t, err, access.UntrustedCertificate, "certificate signed by unknown authority")
	})
	t.Run("plain connection to a TLS-only set", func(t *testing.T) {
		_, err := Open(ctx, Options{URI: login(plain, shop), Database: "shop_lp"})
		oneLine(t, err, access.TLSMismatch, "if it requires TLS, add tls=true")
	})
}
