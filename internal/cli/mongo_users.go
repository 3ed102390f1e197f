package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/sharding"
)

// mongoUsersOptions are `mongo users`'s settings.
type mongoUsersOptions struct {
	Dir               string
	Database          string
	AdminPasswordFile string
}

func newCmdMongoUsers(stdio IO, runF func(context.Context, mongoUsersOptions) error) *cobra.Command {
	var o mongoUsersOptions
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Create shardmart's least-privilege users in the local set or cluster started with `mongo up --auth`",
		Long: `Logs in as the admin user of the set or cluster in --dir and creates (or updates) the
users shardmart's components log in as, each with the built-in roles it needs and no more:

  shardmart_shop     readWrite on --db                       serve, seed, migrate
  shardmart_lag      clusterMonitor, readWrite on shardmart_monitor
                                                             serve --mongo-monitor-user
  shardmart_monitor  clusterMonitor                          shardmart monitor

In a cluster each user is created only where it logs in: shardmart_shop on the config server
(where a mongos keeps its users; the shop has no login on the shards), shardmart_lag on every
shard, shardmart_monitor on both (it reads the config server and pings each shard). Passwords are random, kept in <dir>/users/<user>.password (mode
0600) and reused when the command runs again. docs/mongodb.md lists the same grants as
mongosh commands for a production cluster.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runOrRunF(cmd.Context(), stdio, o, mongoUsers, runF)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Dir, "dir", defaultMongoDir, "directory given to `mongo up --auth`")
	f.StringVar(&o.Database, "db", sharding.DefaultDatabase, "the shop's database")
	f.StringVar(&o.AdminPasswordFile, "admin-password-file", "", "file holding the admin password (default <dir>/admin.password, as `mongo up --auth` made it)")
	return cmd
}

// userCreator is a local set or cluster that can create users.
type userCreator interface {
	CreateUser(ctx context.Context, u launcher.User) error
	URI() string
}

func mongoUsers(ctx context.Context, stdio IO, o mongoUsersOptions) error {
	pwFile := o.AdminPasswordFile
	if pwFile == "" {
		pwFile = adminPasswordFile(o.Dir)
	}
	admin, err := launcher.ReadPasswordFile(pwFile)
	if err != nil {
		return fmt.Errorf("admin password: %w (was the set started with `mongo up --auth`?)", err)
	}
	target, sec, err := openForUsers(o.Dir, admin)
	if err != nil {
		return err
	}
	if !sec.Auth {
		return fmt.Errorf("%s was not started with --auth: there are no users to create", o.Dir)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, mk := range []func(pw string) launcher.User{
		func(pw string) launcher.User { return launcher.ShopUser("shardmart_shop", pw, o.Database) },
		func(pw string) launcher.User { return launcher.LagMonitorUser("shardmart_lag", pw) },
		func(pw string) launcher.User { return launcher.HotShardMonitorUser("shardmart_monitor", pw) },
	} {
		name := mk("").Name
		path := filepath.Join(o.Dir, "users", name+".password")
		if err := launcher.MakePasswordFile(path); err != nil {
			return fmt.Errorf("password of %s: %w", name, err)
		}
		pw, err := launcher.ReadPasswordFile(path)
		if err != nil {
			return err
		}
		u := mk(pw)
		if err := target.CreateUser(ctx, u); err != nil {
			return err
		}
		var grants []string
		for _, g := range u.Grants {
			grants = append(grants, g.Role+"@"+g.DB)
		}
		fmt.Fprintf(stdio.Out, "%-18s %-50s password in %s\n", name, strings.Join(grants, ", "), path)
	}
	fmt.Fprintf(stdio.Out, "log in with user:password@ in %s and authSource=admin\n", target.URI())
	return nil
}

// openForUsers opens the cluster or the set in dir with the admin password.
func openForUsers(dir, adminPassword string) (userCreator, launcher.Security, error) {
	c, err := launcher.OpenCluster(dir, nil)
	if err == nil {
		c.SetAdminPassword(adminPassword)
		return clusterUsers{c}, c.Config.Security(), nil
	}
	if !errors.Is(err, launcher.ErrNoSet) {
		return nil, launcher.Security{}, err
	}
	s, err := launcher.Open(dir, nil)
	if err != nil {
		return nil, launcher.Security{}, err
	}
	s.SetAdminPassword(adminPassword)
	return s, s.Security(), nil
}

// clusterUsers creates users in every set of a cluster; its URI is the config server's.
type clusterUsers struct{ *launcher.Cluster }

func (c clusterUsers) URI() string { return c.ConfigURI() }
